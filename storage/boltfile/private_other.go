//go:build !linux

package boltfile

import "os"

// privateFile is a temporary file for a private copy of the log, with its
// path, and the function that removes it.
func privateFile() (f *os.File, path string, done func(), err error) {
	return privateTempFile()
}
