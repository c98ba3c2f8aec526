// Package filesnap owns the write-ahead undo information of files: before
// a call, what the files it may change hold (named files' bytes and modes,
// or a whole project's tree); after it, what it changed; and the restore
// that puts back every file it changed, refusing a file changed since by
// someone else.
//
// A project's snapshots live in a store of its own outside it (StoreDir):
// file bytes as content-addressed blobs (git's loose objects), so that a
// snapshot stores only what changed, and for a whole-project snapshot a
// manifest of every file with its stat data, so that the next scan reads
// only the files whose stat data changed. What the project's .gitignore
// files ignore is git's decision (check-ignore, with the store's own git
// directory); the project's own .git directories are neither read nor
// written.
package filesnap

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/undolog/undolog/model"
)

// State is a path's state at one moment: absent, a regular file (its
// bytes by blob id, its permission bits) or a symbolic link (its target by
// blob id).
type State struct {
	Kind string `json:"kind"`
	Blob string `json:"blob,omitempty"`
	// Mode is a file's permission bits.
	Mode fs.FileMode `json:"mode,omitempty"`
}

// Kinds of State.
const (
	Absent  = "absent"
	File    = "file"
	Symlink = "symlink"
)

// Change is a path a call changed, relative to its project (slash-separated).
type Change struct {
	Path   string `json:"path"`
	Before State  `json:"before"`
	After  State  `json:"after"`
	// Lost says why a restore cannot put the path back (a repository's
	// own state, an ignored path too large to hold, a file outside the
	// project written through a link): the restore refuses the call's
	// every change, and undo stops for a person.
	Lost string `json:"lost,omitempty"`
}

// What a change did, as Describe says it.
func (c Change) What() string {
	switch {
	case c.Before.Kind == Absent:
		return "created"
	case c.After.Kind == Absent:
		return "deleted"
	}
	return "modified"
}

// snapshot is what Before recorded, and After completes.
type snapshot struct {
	Project string `json:"project"`
	// Whole: the project's manifest (named by the snapshot's id until
	// After); else Paths, each with its Before state in Changes.
	Whole bool     `json:"whole,omitempty"`
	Paths []string `json:"paths,omitempty"`
	// Watches are named paths that lead outside the project.
	Watches []watch `json:"watches,omitempty"`
	// Changes are, once After has run, the paths the call changed.
	Changes []Change `json:"changes"`
	// CreatedDirs are the directories the call created (for the files it
	// created): a restore removes them once empty.
	CreatedDirs []string `json:"created_dirs,omitempty"`
	// RemovedDirs are the directories the call removed: a restore makes
	// them again (empty ones too).
	RemovedDirs []string `json:"removed_dirs,omitempty"`
	Done        bool     `json:"done"`
}

// ErrChanged is a restore refused: a file is not as the call left it.
var ErrChanged = errors.New("changed since the call")

// ErrLost is a restore refused: the call changed a path the snapshot does
// not hold (Change.Lost).
var ErrLost = errors.New("not held by the snapshot")

// ErrNotAfter is a restore of a snapshot whose After never ran.
var ErrNotAfter = errors.New("the call's after-state was never recorded")

var idForm = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{24}$`) })

// Before records the state of paths (relative to project, or absolute
// inside it) before a call changes them; nil paths: the whole project's
// tree. It returns the snapshot's id.
func Before(project string, paths []string) (string, error) {
	s, err := Open(project)
	if err != nil {
		return "", err
	}
	return s.Before(paths)
}

// After records what the call of snapshot id changed.
func After(project, id string) error {
	s, err := Open(project)
	if err != nil {
		return err
	}
	return s.After(id)
}

// Compensation is the undo of snapshot id's call: undolog files restore,
// run by the undolog binary that runs now.
func Compensation(project, id string) model.Compensation {
	exe, err := os.Executable()
	if err != nil {
		exe = "undolog"
	}
	return CompensationFor(exe, StoreDir(project), project, id)
}

// CompensationFor is the command compensation by which program restores
// snapshot id of the store at store, run in project.
func CompensationFor(program, store, project, id string) model.Compensation {
	return model.Compensation{Kind: model.CompensationCommand, Argv: []string{program, "files", "restore", "--store", store, id}, Dir: project}
}

// RestoreRefusedExit is the exit code of `undolog files restore` refusing
// for good (ErrChanged, ErrLost, ErrNotAfter): trying it again changes
// nothing.
const RestoreRefusedExit = 12

// ParseRestore reads a command compensation's argv made by CompensationFor:
// its store and snapshot id.
func ParseRestore(c model.Compensation) (store, id string, ok bool) {
	a := c.Argv
	if c.Kind != model.CompensationCommand || len(a) != 6 || a[1] != "files" || a[2] != "restore" || a[3] != "--store" || !idForm().MatchString(a[5]) {
		return "", "", false
	}
	return a[4], a[5], true
}

// StoreDir is where project's private store lives: under
// $UNDOLOG_FILES_DIR, else $XDG_STATE_HOME/undolog/files, else
// ~/.local/state/undolog/files, one directory a project (named by its base
// name and a hash of its absolute path).
func StoreDir(project string) string {
	abs, err := filepath.Abs(project)
	if err != nil {
		abs = project
	}
	root := os.Getenv("UNDOLOG_FILES_DIR")
	if root == "" {
		state := os.Getenv("XDG_STATE_HOME")
		if state == "" {
			home, _ := os.UserHomeDir()
			state = filepath.Join(home, ".local", "state")
		}
		root = filepath.Join(state, "undolog", "files")
	}
	sum := sha1.Sum([]byte(abs))
	base := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return '_'
		}
		return r
	}, filepath.Base(abs))
	return filepath.Join(root, base+"-"+hex.EncodeToString(sum[:6]))
}

// Store is a project's private store.
type Store struct {
	Dir     string
	Project string
}

// Open opens (creating it on first use) project's store at StoreDir.
func Open(project string) (*Store, error) {
	abs, err := filepath.Abs(project)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", abs)
	}
	s := &Store{Dir: StoreDir(abs), Project: abs}
	return s, s.init()
}

// OpenDir opens the store at dir, made by Open: for a restore, which reads
// its project from the snapshot.
func OpenDir(dir string) *Store { return &Store{Dir: dir} }

// Before records the state of paths, or of the whole project (nil).
func (s *Store) Before(paths []string) (string, error) {
	id := newID()
	snap := snapshot{Project: s.Project, Whole: paths == nil, Changes: []Change{}}
	if snap.Whole {
		cache, err := s.lastScan()
		if err != nil {
			return "", err
		}
		m, err := s.scan(cache)
		if err != nil {
			return "", err
		}
		if err := s.saveManifest(id, m); err != nil {
			return "", err
		}
	} else {
		root, err := os.OpenRoot(s.Project)
		if err != nil {
			return "", err
		}
		defer root.Close()
		for _, p := range paths {
			rel, err := s.rel(p)
			if err != nil {
				return "", err
			}
			if slices.Contains(snap.Paths, rel) {
				continue
			}
			st, err := s.capture(root, rel)
			if err != nil {
				return "", err
			}
			snap.Paths = append(snap.Paths, rel)
			snap.Changes = append(snap.Changes, Change{Path: rel, Before: st})
			if target, outside := s.outsideTarget(rel); outside {
				snap.Watches = append(snap.Watches, outsideWatch(rel, target))
			}
		}
		snap.CreatedDirs = createdDirs(snap.Paths, func(dir string) bool {
			_, err := root.Lstat(filepath.FromSlash(dir))
			return err == nil
		})
	}
	return id, s.save(id, snap)
}

// After records what snapshot id's call changed: the paths whose state
// differs from Before's.
func (s *Store) After(id string) error {
	snap, err := s.load(id)
	if err != nil {
		return err
	}
	if snap.Whole {
		before, err := s.loadManifest(id)
		if err != nil {
			return err
		}
		if before == nil {
			return fmt.Errorf("%w: snapshot %s's manifest is gone from %s", model.ErrNotFound, id, s.Dir)
		}
		after, err := s.scan(before)
		if err != nil {
			return err
		}
		if err := s.saveManifest(lastScanName, after); err != nil {
			return err
		}
		os.Remove(s.manifestPath(id))
		s.dropLatest()
		snap.Changes = append(diff(before, after), lost(before.watches, after.watches, before.start)...)
		snap.CreatedDirs = missing(after.dirs, before.dirs)
		snap.RemovedDirs = missing(before.dirs, after.dirs)
	} else {
		root, err := os.OpenRoot(s.Project)
		if err != nil {
			return err
		}
		defer root.Close()
		changed := []Change{}
		for _, c := range snap.Changes {
			// Its blob is stored only where it is needed again: to tell a
			// later change from this one.
			now, err := s.capture(root, c.Path)
			if err != nil {
				return err
			}
			if !c.Before.equal(now) {
				c.After = now
				changed = append(changed, c)
			}
		}
		for _, w := range snap.Watches {
			if now := outsideWatch(w.Path, w.Target); now.Print != w.Print {
				changed = append(changed, now.lost(File, File))
			}
		}
		snap.Changes = changed
		// Only those the call made: the others are not the restore's.
		snap.CreatedDirs = slices.DeleteFunc(snap.CreatedDirs, func(d string) bool {
			_, err := root.Lstat(filepath.FromSlash(d))
			return err != nil
		})
	}
	snap.Done = true
	return s.save(id, snap)
}

// Changes are what snapshot id's call changed, in path order.
func (s *Store) Changes(id string) ([]Change, error) {
	snap, err := s.load(id)
	if err != nil {
		return nil, err
	}
	if !snap.Done {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotAfter)
	}
	return snap.listing(), nil
}

// rel is p relative to the project, slash-separated; p outside it is an
// error.
func (s *Store) rel(p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.Project, p)
	}
	rel, err := filepath.Rel(s.Project, filepath.Clean(p))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q is not a file inside the project %s", model.ErrInvalidInput, p, s.Project)
	}
	return filepath.ToSlash(rel), nil
}

// capture is rel's state now, its blob written to the store.
func (s *Store) capture(root *os.Root, rel string) (State, error) {
	st, data, err := stateOf(root, rel)
	if err != nil || st.Kind == Absent {
		return st, err
	}
	return st, s.writeBlob(st.Blob, data)
}

// stateOf is rel's state now, with its blob's bytes. A directory (or any
// other kind of file) is not a state a restore can put back: an error.
func stateOf(root *os.Root, rel string) (State, []byte, error) {
	name := filepath.FromSlash(rel)
	info, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, notADirectory):
		return State{Kind: Absent}, nil, nil
	case err != nil:
		return State{}, nil, err
	}
	switch {
	case info.Mode().IsRegular():
		data, err := root.ReadFile(name)
		if err != nil {
			return State{}, nil, err
		}
		return State{Kind: File, Blob: blobID(data), Mode: info.Mode().Perm()}, data, nil
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(name)
		if err != nil {
			return State{}, nil, err
		}
		return State{Kind: Symlink, Blob: blobID([]byte(target))}, []byte(target), nil
	case info.IsDir():
		return State{Kind: directory}, nil, nil
	}
	return State{}, nil, fmt.Errorf("%s is neither a file, a symbolic link nor a directory (%s)", rel, info.Mode().Type())
}

// blobID is git's object id of a blob of data (SHA-1, the store's format).
func blobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// missing are the paths of a (sorted) not in b (sorted).
func missing(a, b []string) []string {
	var out []string
	for _, p := range a {
		if _, ok := slices.BinarySearch(b, p); !ok {
			out = append(out, p)
		}
	}
	return out
}

// lastScanName names the manifest of the store's last After: the next scan's
// stat cache. A Before's manifest is not: its After scans with it, and the
// cache of a Before whose After never runs is as good as the last After's
// (a file's cached blob is taken only when its stat data is as cached).
const lastScanName = "last"

// lastScan is the manifest the next scan takes as its stat cache; nil
// where there is none.
func (s *Store) lastScan() (*manifest, error) {
	m, err := s.loadManifest(lastScanName)
	if m == nil && err == nil {
		if name, ok := s.latest(); ok && name != "" {
			return s.loadManifest(name)
		}
	}
	return m, err
}

// latest is the manifest an earlier undolog's store named its last scan
// in the file latest.
func (s *Store) latest() (string, bool) {
	name, err := os.ReadFile(filepath.Join(s.Dir, "latest"))
	return strings.TrimSpace(string(name)), err == nil
}

// dropLatest removes an earlier undolog's latest, and the manifest it
// names if an After wrote it, once the store has its last scan.
func (s *Store) dropLatest() {
	if name, ok := s.latest(); ok {
		if strings.HasSuffix(name, ".after") {
			os.Remove(s.manifestPath(name))
		}
		os.Remove(filepath.Join(s.Dir, "latest"))
	}
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Store) snapPath(id string) string { return filepath.Join(s.Dir, "snapshots", id+".json") }

func (s *Store) save(id string, snap snapshot) error {
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	// Written whole or not at all: a restore reads it much later.
	tmp := s.snapPath(id) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.snapPath(id))
}

func (s *Store) load(id string) (snapshot, error) {
	var snap snapshot
	if !idForm().MatchString(id) {
		return snap, fmt.Errorf("%w: %q is not a snapshot id", model.ErrInvalidInput, id)
	}
	data, err := os.ReadFile(s.snapPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return snap, fmt.Errorf("%w: no snapshot %s in %s", model.ErrNotFound, id, s.Dir)
	}
	if err != nil {
		return snap, err
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		return snap, fmt.Errorf("snapshot %s is not readable: %v", id, err)
	}
	return snap, nil
}

// equal tells whether a state now is st.
func (st State) equal(now State) bool { return st == now }

// describe says what a state is, for an error.
func (st State) describe() string {
	switch st.Kind {
	case File:
		return fmt.Sprintf("a file (mode %04o, %.12s)", st.Mode, st.Blob)
	case Symlink:
		return "a symbolic link"
	case directory:
		return "a directory"
	}
	return "absent"
}
