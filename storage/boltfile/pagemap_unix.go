//go:build unix

package boltfile

import (
	"os"
	"syscall"
)

// mapPages maps the first size bytes of f, read-only, for the page walk;
// unmap lets them go.
func mapPages(f *os.File, size uint64) (pages []byte, unmap func(), err error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	pages, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return pages, func() { syscall.Munmap(pages) }, nil
}
