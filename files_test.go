package main

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoEmptyFiles keeps the tree free of empty files: one is most often
// the mark of a command run in a source directory (a stray redirect or a
// touch of a relative path), not something a person meant to add.
func TestNoEmptyFiles(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() == 0 {
			t.Errorf("%s is empty: delete it, and find what made it (a command run in the source tree?)", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
