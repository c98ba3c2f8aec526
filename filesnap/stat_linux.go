package filesnap

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// readDir lists a directory with each entry's stat data, stat'ed by name
// relative to the open directory (fstatat): no path is resolved again.
func readDir(dir string) ([]dirent, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	list := make([]dirent, 0, len(names))
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since it was listed
		}
		d := dirent{name: name, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, mode: fs.FileMode(st.Mode & 0o777)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			d.kind = 'd'
		case unix.S_IFREG:
			d.kind = 'f'
		case unix.S_IFLNK:
			d.kind, d.mode = 'l', 0
		}
		list = append(list, d)
	}
	return list, nil
}

// statFollow is path's stat data, symbolic links followed.
func statFollow(path string) (dirent, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return dirent{}, err
	}
	d := dirent{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, mode: fs.FileMode(st.Mode & 0o777)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		d.kind = 'd'
	case unix.S_IFREG:
		d.kind = 'f'
	}
	return d, nil
}
