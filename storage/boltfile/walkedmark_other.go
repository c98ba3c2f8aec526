//go:build !linux

package boltfile

import "os"

// The journal carries no mark of the walked state here (walkedmark_linux.go):
// each writer process walks the file once.
func hasWalkedMark(journal string, info os.FileInfo, txid uint64) bool { return false }

func setWalkedMark(journal string, info os.FileInfo, txid uint64) {}
