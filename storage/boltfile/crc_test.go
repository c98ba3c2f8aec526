package boltfile

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// crc32c agrees with hash/crc32's CRC-32C on every length and alignment:
// a journal written before it (by hash/crc32) reads the same.
func TestCRC32CIsCastagnoli(t *testing.T) {
	table := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 9000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for n := 0; n <= 300; n++ {
		for _, off := range []int{0, 1, 3, 7} {
			p := data[off : off+n]
			if got, want := crc32c(p), crc32.Checksum(p, table); got != want {
				t.Fatalf("length %d at %d: %08x, want %08x", n, off, got, want)
			}
		}
	}
	for range 200 {
		p := data[rng.IntN(100):][:rng.IntN(8000)]
		if got, want := crc32c(p), crc32.Checksum(p, table); got != want {
			t.Fatalf("length %d: %08x, want %08x", len(p), got, want)
		}
	}
}
