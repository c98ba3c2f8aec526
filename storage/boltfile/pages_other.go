//go:build !linux

package boltfile

// dropPages gives back the pages a read touched where the system says how
// (see pages_linux.go); here it does nothing.
func (t *readTx) dropPages() {}
