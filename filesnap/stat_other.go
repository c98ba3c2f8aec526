//go:build !linux

package filesnap

import (
	"io/fs"
	"os"
)

// readDir lists a directory with each entry's stat data (size and mtime:
// no inode or ctime here).
func readDir(dir string) ([]dirent, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	list := make([]dirent, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // gone since it was listed
		}
		d := dirent{name: e.Name(), size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode().Perm()}
		switch {
		case info.IsDir():
			d.kind = 'd'
		case info.Mode().IsRegular():
			d.kind = 'f'
		case info.Mode()&fs.ModeSymlink != 0:
			d.kind, d.mode = 'l', 0
		}
		list = append(list, d)
	}
	return list, nil
}

// statFollow is path's stat data, symbolic links followed.
func statFollow(path string) (dirent, error) {
	info, err := os.Stat(path)
	if err != nil {
		return dirent{}, err
	}
	d := dirent{size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode().Perm()}
	switch {
	case info.IsDir():
		d.kind = 'd'
	case info.Mode().IsRegular():
		d.kind = 'f'
	}
	return d, nil
}
