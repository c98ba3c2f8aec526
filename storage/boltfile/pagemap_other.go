//go:build !unix

package boltfile

import "os"

// mapPages reads the first size bytes of f for the page walk, where no
// map of the file is to be had.
func mapPages(f *os.File, size uint64) (pages []byte, unmap func(), err error) {
	pages = make([]byte, size)
	if _, err := f.ReadAt(pages, 0); err != nil {
		return nil, nil, err
	}
	return pages, func() {}, nil
}
