package boltfile

import (
	"encoding/binary"
	"sync"
)

// crc32c is the CRC-32C (Castagnoli) checksum of data, which the journal's
// records carry, by slicing-by-8 over tables made on first use. hash/crc32's
// own tables for this polynomial, made for the SSE4.2 instruction's long
// inputs, take 0.15 ms to build: a twentieth of a write command, whose
// journal holds a few records of a few KiB.
func crc32c(data []byte) uint32 {
	t := crc32cTables()
	crc := ^uint32(0)
	for len(data) >= 8 {
		crc ^= binary.LittleEndian.Uint32(data)
		crc = t[0][data[7]] ^ t[1][data[6]] ^ t[2][data[5]] ^ t[3][data[4]] ^
			t[4][crc>>24] ^ t[5][crc>>16&0xff] ^ t[6][crc>>8&0xff] ^ t[7][crc&0xff]
		data = data[8:]
	}
	for _, b := range data {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// crc32cTables are the slicing-by-8 tables of the reflected Castagnoli
// polynomial: t[0][b] is the CRC of byte b, t[k][b] that of b followed by k
// zero bytes.
var crc32cTables = sync.OnceValue(func() *[8][256]uint32 {
	const poly = 0x82f63b78
	var t [8][256]uint32
	for i := range 256 {
		crc := uint32(i)
		for range 8 {
			if crc&1 == 1 {
				crc = crc>>1 ^ poly
			} else {
				crc >>= 1
			}
		}
		t[0][i] = crc
	}
	for i := range 256 {
		crc := t[0][i]
		for k := 1; k < 8; k++ {
			crc = t[0][crc&0xff] ^ crc>>8
			t[k][i] = crc
		}
	}
	return &t
})
