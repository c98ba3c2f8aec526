//go:build !unix

package boltfile

import "os"

// fileOwner: no owners here that this build reads; files are not refused
// for theirs.
func fileOwner(os.FileInfo) (uid int, ok bool) { return 0, false }

// openNoFollow: no flag for it here; the path is checked before the open.
const openNoFollow = 0
