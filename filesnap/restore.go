package filesnap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Undo says what a restore does to the change's path.
func (c Change) Undo() string {
	dir := ""
	if c.Before.Kind == directory || c.After.Kind == directory {
		dir = " directory"
	}
	switch {
	case c.Lost != "":
		return "cannot restore"
	case c.What() == "created":
		return "remove" + dir
	case c.What() == "deleted":
		return "bring back" + dir
	}
	return "restore"
}

// directory is the State of a directory: a restore removes those the call
// created (once empty) and makes again those it removed.
const directory = "directory"

// listing is every change a restore of snap makes or refuses: its files'
// and its directories'.
func (snap snapshot) listing() []Change {
	out := slices.Clone(snap.Changes)
	for _, d := range snap.CreatedDirs {
		out = append(out, Change{Path: d, Before: State{Kind: Absent}, After: State{Kind: directory}})
	}
	for _, d := range snap.RemovedDirs {
		out = append(out, Change{Path: d, Before: State{Kind: directory}, After: State{Kind: Absent}})
	}
	return out
}

// Restore puts every path snapshot id's call changed back as it was
// before the call: files it created are removed (and the directories it
// created for them, once empty), files it deleted come back, files it
// modified get their bytes and mode back. It first checks every path: one
// that is neither as the call left it nor already restored is an
// ErrChanged naming it, and nothing is changed. It returns the changes.
func (s *Store) Restore(id string) ([]Change, error) {
	snap, err := s.load(id)
	if err != nil {
		return nil, err
	}
	if !snap.Done {
		return nil, fmt.Errorf("snapshot %s: %w: the call may have changed any file; restore by hand", id, ErrNotAfter)
	}
	if s.Project == "" {
		s.Project = snap.Project
	}
	root, err := os.OpenRoot(snap.Project)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, c := range snap.Changes {
		if c.Lost != "" {
			return nil, fmt.Errorf("%w: %s: %s; nothing was restored: put it right by hand", ErrLost, strconv.Quote(c.Path), c.Lost)
		}
	}
	todo := []Change{}
	var replacedByDirs []string
	for _, c := range snap.Changes {
		now, _, err := stateOf(root, c.Path)
		if err != nil {
			return nil, err
		}
		switch {
		case c.Before.equal(now):
			continue // restored already (a restore run again)
		case c.After.equal(now):
		case c.After.Kind == Absent && now.Kind == directory:
			// The call put a directory where this was (its files are
			// changes of their own); it must be empty once they are gone.
			replacedByDirs = append(replacedByDirs, c.Path)
		default:
			return nil, fmt.Errorf("%w: %s is %s, the call left it %s: restore it by hand", ErrChanged, strconv.Quote(c.Path), now.describe(), c.After.describe())
		}
		if c.Before.Kind != Absent {
			if _, err := os.Stat(s.objectPath(c.Before.Blob)); err != nil {
				return nil, fmt.Errorf("%s: its bytes before the call: blob %s is not in %s", strconv.Quote(c.Path), c.Before.Blob, s.gitDir())
			}
		}
		todo = append(todo, c)
	}
	if err := onlyCreated(root, replacedByDirs, snap); err != nil {
		return nil, err
	}
	// Deepest first: what the call created goes before what it replaced
	// comes back (a file it replaced by a directory).
	slices.SortStableFunc(todo, func(a, b Change) int {
		return strings.Count(b.Path, "/") - strings.Count(a.Path, "/")
	})
	for _, c := range todo {
		if c.Before.Kind != Absent {
			continue
		}
		if err := root.Remove(filepath.FromSlash(c.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	removeCreatedDirs(root, snap.CreatedDirs)
	for _, c := range todo {
		if c.Before.Kind == Absent {
			continue
		}
		if err := s.put(root, c); err != nil {
			return nil, err
		}
	}
	for _, d := range snap.RemovedDirs {
		if err := root.MkdirAll(filepath.FromSlash(d), 0o777); err != nil {
			return nil, fmt.Errorf("%s: %v", strconv.Quote(d), err)
		}
	}
	return snap.listing(), nil
}

// onlyCreated checks, before a restore changes anything, that each of dirs
// (a directory the call put where a file was) holds only what the call
// created: the file comes back only once they are gone.
func onlyCreated(root *os.Root, dirs []string, snap snapshot) error {
	created := map[string]bool{}
	for _, c := range snap.Changes {
		if c.Before.Kind == Absent {
			created[c.Path] = true
		}
	}
	for _, d := range snap.CreatedDirs {
		created[d] = true
	}
	for _, d := range dirs {
		err := fs.WalkDir(root.FS(), d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != d && !created[p] {
				return fmt.Errorf("%w: %s is a directory that holds %s, which the call did not create: restore it by hand", ErrChanged, strconv.Quote(d), strconv.Quote(p))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// removeCreatedDirs removes the directories a call created, deepest first,
// where they are empty: one that holds anything is left.
func removeCreatedDirs(root *os.Root, dirs []string) {
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if info, err := root.Lstat(filepath.FromSlash(d)); err == nil && info.IsDir() {
			root.Remove(filepath.FromSlash(d)) // fails, as it should, where not empty
		}
	}
}

// put writes c's path as it was before the call, through a temporary file
// renamed into place.
func (s *Store) put(root *os.Root, c Change) error {
	name := filepath.FromSlash(c.Path)
	data, err := s.readBlob(c.Before.Blob)
	if err != nil {
		return err
	}
	if err := root.MkdirAll(filepath.Dir(name), 0o777); err != nil {
		return fmt.Errorf("%s: %v", strconv.Quote(c.Path), err)
	}
	if info, err := root.Lstat(name); err == nil && info.IsDir() {
		if err := root.Remove(name); err != nil {
			return fmt.Errorf("%w: %s is a directory that holds files the call did not create: restore it by hand", ErrChanged, strconv.Quote(c.Path))
		}
	}
	tmp := filepath.Join(filepath.Dir(name), ".undolog-restore-"+newID())
	switch c.Before.Kind {
	case Symlink:
		if err := root.Symlink(string(data), tmp); err != nil {
			return err
		}
	case File:
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = root.Chmod(tmp, c.Before.Mode)
		}
		if werr != nil {
			root.Remove(tmp)
			return werr
		}
	}
	if err := root.Rename(tmp, name); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}

// createdDirs are the ancestors of paths (slash paths) that did not exist
// before the call: those a restore removes once empty.
func createdDirs(paths []string, existed func(dir string) bool) []string {
	dirs := []string{}
	for _, p := range paths {
		for d := path.Dir(p); d != "." && !slices.Contains(dirs, d); d = path.Dir(d) {
			if existed(d) {
				break
			}
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Describe is one line saying what a restore does (would, for a dry run)
// to a change's path, or why it cannot.
func Describe(would bool, c Change) string {
	line := fmt.Sprintf("%s %s (%s by the call)", c.Undo(), strconv.Quote(c.Path), c.What())
	switch {
	case c.Lost != "":
		return "CANNOT RESTORE " + line[len(c.Undo())+1:] + ": " + c.Lost
	case would:
		return "would " + line
	}
	return line
}
