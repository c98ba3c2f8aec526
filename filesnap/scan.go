package filesnap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// entry is a file or symbolic link of a manifest, with the stat data that
// tells, at the next scan, that it has not changed.
type entry struct {
	path  string
	kind  byte // File's 'f', Symlink's 'l'
	mode  fs.FileMode
	blob  [20]byte
	size  int64
	mtime int64
	ctime int64
	ino   uint64
}

// manifest is a project's state at one scan: its files and symbolic links
// (sorted by path), its directories, and the paths its .gitignore files
// leave out (as git decides: they are not walked).
type manifest struct {
	start   int64 // when the scan began (Unix ns)
	entries []entry
	dirs    []string
	ignored []string
	// watches are the paths it sees but does not hold.
	watches []watch
}

// racy is how close to a scan's start a file's mtime makes its stat data
// untrustworthy (a change within a timestamp's granularity): it is read again.
const racy = 2 * time.Second

func (e entry) state() State {
	if e.kind == 'l' {
		return State{Kind: Symlink, Blob: hex.EncodeToString(e.blob[:])}
	}
	return State{Kind: File, Blob: hex.EncodeToString(e.blob[:]), Mode: e.mode}
}

// scan walks the project: every file and symbolic link, .git directories
// and ignored paths aside. A file whose stat data is as cache has it is
// not read again; a new one's blob is written to the store. Whether a new
// path under a .gitignore is ignored is asked of git (git check-ignore,
// one run per level that has such paths), the rest is cache's answer:
// unless a .gitignore file changed, when everything is asked again.
func (s *Store) scan(cache *manifest) (*manifest, error) {
	m, err := s.scanWith(cache, true)
	if err != nil {
		return nil, err
	}
	if cache != nil && ignoresChanged(cache, m) {
		return s.scanWith(cache, false)
	}
	return m, nil
}

// dirent is a directory entry with its stat data; kind is 'd', 'f' or 'l'
// (0: any other kind of file, which a snapshot leaves out).
type dirent struct {
	name  string
	kind  byte
	mode  fs.FileMode
	size  int64
	mtime int64
	ctime int64
	ino   uint64
}

func (s *Store) scanWith(cache *manifest, trustIgnored bool) (*manifest, error) {
	if cache == nil {
		cache = &manifest{}
	}
	m := &manifest{start: time.Now().UnixNano(), entries: make([]entry, 0, len(cache.entries)+16), dirs: make([]string, 0, len(cache.dirs)+4)}
	// known indexes cache's entries by path (its directories: -1).
	known := make(map[string]int, len(cache.entries)+len(cache.dirs))
	ignored := map[string]bool{}
	for i, e := range cache.entries {
		known[e.path] = i
	}
	for _, d := range cache.dirs {
		known[d] = -1
	}
	if trustIgnored {
		for _, p := range cache.ignored {
			ignored[p] = true
		}
	}
	wasLarge := map[string]bool{}
	for _, w := range cache.watches {
		if w.Kind == watchLarge {
			wasLarge[w.Path] = true
		}
	}
	// An ignored directory (a root: node_modules, build output) is held
	// up to ignoredDirLimit entries; past that it is watched, not held.
	count := map[string]int{}
	tooLarge := map[string]dirent{}
	type found struct {
		rel  string
		root string // the ignored directory it is in ("": none)
		d    dirent
	}
	type dir struct{ rel, root string }
	level := []dir{{".", ""}}
	// A new path can be ignored only by a .gitignore of a directory on its
	// way (or the store's info/exclude): where there is none, git is not
	// asked (a process of its own, most of a small project's scan).
	excludes, err := s.hasExcludes()
	if err != nil {
		return nil, err
	}
	ignoreFiles := map[string]bool{} // directories that hold a .gitignore
	mayBeIgnored := func(dir string) bool {
		for ; ; dir = path.Dir(dir) {
			if excludes || ignoreFiles[dir] {
				return true
			}
			if dir == "." {
				return false
			}
		}
	}
	for len(level) > 0 {
		// A level's directories are read side by side: the stat calls are
		// most of a scan.
		lists := make([][]dirent, len(level))
		errs := make([]error, len(level))
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(len(level), scanWorkers) {
			wg.Go(func() {
				for i := range next {
					lists[i], errs[i] = readDir(filepath.Join(s.Project, filepath.FromSlash(level[i].rel)))
				}
			})
		}
		for i := range level {
			next <- i
		}
		close(next)
		wg.Wait()
		var all []found
		var unknown []string
		for i, dir := range level {
			if errors.Is(errs[i], fs.ErrNotExist) {
				continue // gone since its parent was read
			}
			if errs[i] != nil {
				return nil, errs[i]
			}
			if slices.ContainsFunc(lists[i], func(d dirent) bool { return d.name == ".gitignore" }) {
				ignoreFiles[dir.rel] = true
			}
			for _, d := range lists[i] {
				rel := d.name
				if dir.rel != "." {
					rel = dir.rel + "/" + d.name
				}
				if d.name == ".git" && d.kind != 'l' && d.kind != 0 {
					m.watches = append(m.watches, s.repoWatch(rel, d))
					continue
				}
				if d.kind == 0 {
					continue
				}
				all = append(all, found{rel, dir.root, d})
				if _, ok := known[rel]; !ok && !ignored[rel] && dir.root == "" && mayBeIgnored(dir.rel) {
					unknown = append(unknown, rel)
				}
			}
		}
		if len(unknown) > 0 {
			judged, err := s.checkIgnore(unknown)
			if err != nil {
				return nil, err
			}
			for _, p := range judged {
				ignored[p] = true
			}
		}
		level = nil
		for _, f := range all {
			root := f.root
			if root == "" && ignored[f.rel] {
				m.ignored = append(m.ignored, f.rel)
				root = f.rel
				if f.d.kind == 'd' && wasLarge[f.rel] {
					tooLarge[f.rel] = f.d
					continue
				}
			}
			if root != "" && root != f.rel {
				if _, ok := tooLarge[root]; ok {
					continue
				}
				if count[root]++; count[root] > ignoredDirLimit {
					tooLarge[root] = dirent{kind: 'd'}
					continue
				}
			}
			switch {
			case f.d.kind == 'd':
				m.dirs = append(m.dirs, f.rel)
				level = append(level, dir{f.rel, root})
			case root != "" && f.d.kind == 'f' && f.d.size > ignoredFileLimit:
				m.watches = append(m.watches, watch{Path: f.rel, Kind: watchLarge, Print: printOf(f.d)})
			default:
				cached, ok := known[f.rel]
				if !ok || cached < 0 {
					cached = -1
				}
				e, err := s.scanFile(cache, cached, f.rel, f.d)
				if errors.Is(err, fs.ErrNotExist) {
					continue // gone since it was listed
				}
				if err != nil {
					return nil, err
				}
				m.entries = append(m.entries, e)
				if e.kind == 'l' {
					if target, outside := s.outsideTarget(f.rel); outside {
						m.watches = append(m.watches, outsideWatch(f.rel, target))
					}
				}
			}
		}
	}
	if len(tooLarge) > 0 {
		s.dropLarge(m, tooLarge)
	}
	slices.SortFunc(m.entries, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	slices.Sort(m.dirs)
	slices.Sort(m.ignored)
	slices.SortFunc(m.watches, func(a, b watch) int { return strings.Compare(a.Path, b.Path) })
	return m, nil
}

// dropLarge takes out of m what it holds of the ignored directories too
// large to hold, and watches each instead.
func (s *Store) dropLarge(m *manifest, large map[string]dirent) {
	inLarge := func(p string) bool {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := large[dir]; ok {
				return true
			}
		}
		return false
	}
	m.entries = slices.DeleteFunc(m.entries, func(e entry) bool { return inLarge(e.path) })
	m.dirs = slices.DeleteFunc(m.dirs, func(d string) bool { _, ok := large[d]; return ok || inLarge(d) })
	m.watches = slices.DeleteFunc(m.watches, func(w watch) bool { return inLarge(w.Path) })
	for p, d := range large {
		if d.kind == 'd' && d.ino == 0 && d.mtime == 0 {
			// Found too large in this scan: its own stat data.
			d, _ = statFollow(filepath.Join(s.Project, filepath.FromSlash(p)))
		}
		m.watches = append(m.watches, watch{Path: p, Kind: watchLarge, Print: printOf(d)})
	}
}

// scanWorkers is how many directories a scan reads at once.
const scanWorkers = 8

// scanFile is rel's entry: cache's (its entry at index cached, -1: none)
// when its stat data says it is unchanged, else read and stored.
func (s *Store) scanFile(cache *manifest, cached int, rel string, d dirent) (entry, error) {
	e := entry{path: rel, kind: d.kind, mode: d.mode, size: d.size, mtime: d.mtime, ctime: d.ctime, ino: d.ino}
	if cached >= 0 {
		if c := cache.entries[cached]; c.kind == e.kind && c.mode == e.mode && c.size == e.size && c.mtime == e.mtime &&
			c.ctime == e.ctime && c.ino == e.ino && e.mtime < cache.start-int64(racy) {
			e.blob = c.blob
			return e, nil
		}
	}
	name := filepath.Join(s.Project, filepath.FromSlash(rel))
	var data []byte
	var err error
	if e.kind == 'l' {
		var target string
		target, err = os.Readlink(name)
		data = []byte(target)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return entry{}, err
	}
	id := blobID(data)
	hex.Decode(e.blob[:], []byte(id))
	return e, s.writeBlob(id, data)
}

// ignoresChanged tells whether a .gitignore file differs between two scans.
func ignoresChanged(a, b *manifest) bool {
	gitignores := func(m *manifest) map[string][20]byte {
		g := map[string][20]byte{}
		for _, e := range m.entries {
			if path.Base(e.path) == ".gitignore" {
				g[e.path] = e.blob
			}
		}
		return g
	}
	ga, gb := gitignores(a), gitignores(b)
	if len(ga) != len(gb) {
		return true
	}
	for p, blob := range ga {
		if other, ok := gb[p]; !ok || other != blob {
			return true
		}
	}
	return false
}

// diff lists the paths whose state differs between two manifests.
func diff(before, after *manifest) []Change {
	changes := []Change{}
	i, j := 0, 0
	for i < len(before.entries) || j < len(after.entries) {
		switch {
		case j == len(after.entries) || i < len(before.entries) && before.entries[i].path < after.entries[j].path:
			b := before.entries[i]
			changes = append(changes, Change{Path: b.path, Before: b.state(), After: State{Kind: Absent}})
			i++
		case i == len(before.entries) || after.entries[j].path < before.entries[i].path:
			a := after.entries[j]
			changes = append(changes, Change{Path: a.path, Before: State{Kind: Absent}, After: a.state()})
			j++
		default:
			b, a := before.entries[i], after.entries[j]
			if b.kind != a.kind || b.blob != a.blob || b.mode != a.mode {
				changes = append(changes, Change{Path: b.path, Before: b.state(), After: a.state()})
			}
			i, j = i+1, j+1
		}
	}
	return changes
}

// manifestMagic begins a manifest file; its version is its last byte.
var manifestMagic = []byte("undolog-files-manifest\x00\x02")

func (s *Store) manifestPath(name string) string {
	return filepath.Join(s.Dir, "manifests", name)
}

// saveManifest writes m as name, whole or not at all.
func (s *Store) saveManifest(name string, m *manifest) error {
	var buf bytes.Buffer
	buf.Grow(len(m.entries) * 96)
	buf.Write(manifestMagic)
	var scratch [binary.MaxVarintLen64]byte
	put := func(v uint64) { buf.Write(scratch[:binary.PutUvarint(scratch[:], v)]) }
	str := func(v string) { put(uint64(len(v))); buf.WriteString(v) }
	put(uint64(m.start))
	put(uint64(len(m.entries)))
	for _, e := range m.entries {
		str(e.path)
		buf.WriteByte(e.kind)
		put(uint64(e.mode))
		buf.Write(e.blob[:])
		put(uint64(e.size))
		put(uint64(e.mtime))
		put(uint64(e.ctime))
		put(e.ino)
	}
	for _, list := range [][]string{m.dirs, m.ignored} {
		put(uint64(len(list)))
		for _, p := range list {
			str(p)
		}
	}
	put(uint64(len(m.watches)))
	for _, w := range m.watches {
		str(w.Path)
		str(w.Kind)
		str(w.Target)
		str(w.Print)
		put(uint64(w.Mtime))
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "manifests"), 0o700); err != nil {
		return err
	}
	tmp := s.manifestPath(name + ".tmp")
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.manifestPath(name))
}

// loadManifest reads manifest name; nil where there is none.
func (s *Store) loadManifest(name string) (*manifest, error) {
	data, err := os.ReadFile(s.manifestPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if old := manifestMagic[:len(manifestMagic)-1]; bytes.HasPrefix(data, old) && !bytes.HasPrefix(data, manifestMagic) {
		return nil, nil // an earlier version's: no cache
	}
	if !bytes.HasPrefix(data, manifestMagic) {
		return nil, fmt.Errorf("manifest %s is not one (%s)", name, s.Dir)
	}
	r := bufio.NewReader(bytes.NewReader(data[len(manifestMagic):]))
	var rerr error
	get := func() uint64 {
		v, err := binary.ReadUvarint(r)
		if err != nil && rerr == nil {
			rerr = err
		}
		return v
	}
	str := func() string {
		n := get()
		if n > uint64(len(data)) {
			rerr = io.ErrUnexpectedEOF
			return ""
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil && rerr == nil {
			rerr = err
		}
		return string(b)
	}
	m := &manifest{start: int64(get())}
	n := get()
	if n > uint64(len(data)) {
		return nil, fmt.Errorf("manifest %s is damaged (%s)", name, s.Dir)
	}
	m.entries = make([]entry, 0, n)
	for range n {
		e := entry{path: str()}
		e.kind, _ = r.ReadByte()
		e.mode = fs.FileMode(get())
		io.ReadFull(r, e.blob[:])
		e.size, e.mtime, e.ctime, e.ino = int64(get()), int64(get()), int64(get()), get()
		m.entries = append(m.entries, e)
		if rerr != nil {
			break
		}
	}
	for _, list := range []*[]string{&m.dirs, &m.ignored} {
		n := get()
		for i := uint64(0); i < n && rerr == nil; i++ {
			*list = append(*list, str())
		}
	}
	n = get()
	for i := uint64(0); i < n && rerr == nil; i++ {
		m.watches = append(m.watches, watch{Path: str(), Kind: str(), Target: str(), Print: str(), Mtime: int64(get())})
	}
	if rerr != nil {
		return nil, fmt.Errorf("manifest %s is damaged (%s): %v", name, s.Dir, rerr)
	}
	return m, nil
}
