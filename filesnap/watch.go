package filesnap

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A watch is a path whose change a snapshot sees but does not hold, so
// that a restore cannot put it back: it says so and stops for a person
// rather than report the call undone.
type watch struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Target is where an outside link leads.
	Target string `json:"target,omitempty"`
	// Print tells one state of the path from another.
	Print string `json:"print"`
	// Mtime is the path's (an outside link's target's) mtime, Unix ns.
	Mtime int64 `json:"mtime,omitempty"`
}

// Kinds of watch.
const (
	// watchRepo is a git repository's own state (.git: HEAD, refs,
	// index, config), which a snapshot never copies.
	watchRepo = "repository"
	// watchLarge is an ignored directory or file too large to hold.
	watchLarge = "large"
	// watchOutside is a symbolic link's target outside the project.
	watchOutside = "outside"
)

// Bounds of what a shell command's snapshot holds of ignored paths
// (node_modules, build output): beyond them a path is watched, not held.
// Variables: tests lower them.
var (
	ignoredDirLimit        = 2000
	ignoredFileLimit int64 = 16 << 20
)

// printOf is a stat print: kind, size, times, inode and mode.
func printOf(d dirent) string {
	return fmt.Sprintf("%c %d %d %d %d %o", max(d.kind, '-'), d.size, d.mtime, d.ctime, d.ino, d.mode)
}

// repoWatch watches the repository whose .git is at rel: its HEAD,
// config, packed-refs, loose refs and index entries by content (objects
// are only ever added while refs and index stay).
func (s *Store) repoWatch(rel string, d dirent) watch {
	dotgit := filepath.Join(s.Project, filepath.FromSlash(rel))
	h := sha1.New()
	add := func(name string) {
		data, err := os.ReadFile(filepath.Join(dotgit, name))
		if err != nil {
			data = []byte("absent")
		}
		fmt.Fprintf(h, "%s %d\x00", name, len(data))
		h.Write(data)
	}
	if d.kind != 'd' {
		add("") // a .git file naming the repository elsewhere
	} else {
		add("HEAD")
		add("config")
		add("packed-refs")
		filepath.WalkDir(filepath.Join(dotgit, "refs"), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				name, _ := filepath.Rel(dotgit, p)
				add(name)
			}
			return nil
		})
		fmt.Fprintf(h, "index %s\x00", indexPrint(filepath.Join(dotgit, "index")))
	}
	return watch{Path: rel, Kind: watchRepo, Print: hex.EncodeToString(h.Sum(nil))}
}

// outsideTarget is where the path rel leads when that is outside the
// project: a symbolic link (or a linked directory on its way) to a file
// elsewhere, which a write through rel changes.
func (s *Store) outsideTarget(rel string) (string, bool) {
	project, err := filepath.EvalSymlinks(s.Project)
	if err != nil {
		return "", false
	}
	p := filepath.Join(s.Project, filepath.FromSlash(rel))
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		// Absent, or a link to nothing: a write creates its target.
		if link, lerr := os.Readlink(p); lerr == nil {
			if !filepath.IsAbs(link) {
				link = filepath.Join(filepath.Dir(p), link)
			}
			target = filepath.Clean(link)
		} else if dir, derr := filepath.EvalSymlinks(filepath.Dir(p)); derr == nil {
			target = filepath.Join(dir, filepath.Base(p))
		} else {
			return "", false
		}
	}
	inside, err := filepath.Rel(project, target)
	if err == nil && inside != ".." && !strings.HasPrefix(inside, ".."+string(filepath.Separator)) {
		return "", false
	}
	return target, true
}

// outsideWatch watches the outside target of rel.
func outsideWatch(rel, target string) watch {
	w := watch{Path: rel, Kind: watchOutside, Target: target, Print: "absent"}
	if d, err := statFollow(target); err == nil {
		w.Print, w.Mtime = printOf(d), d.mtime
	}
	return w
}

// lost are the changes of watched paths between two states: each a
// Change whose Lost says why a restore cannot put it back. since is when
// the first state was taken (Unix ns).
func lost(before, after []watch, since int64) []Change {
	was := make(map[string]watch, len(before))
	for _, w := range before {
		was[w.Path] = w
	}
	var out []Change
	for _, a := range after {
		b, ok := was[a.Path]
		delete(was, a.Path)
		switch {
		case ok && b.Kind == a.Kind && b.Print == a.Print && b.Target == a.Target:
		case a.Kind == watchOutside && (!ok || b.Target != a.Target) && (a.Print == "absent" || a.Mtime < since):
			// A link made or retargeted by the call (a change of its
			// own), whose target the call did not write.
		case ok:
			out = append(out, a.lost(b.Kind, a.Kind))
		default:
			out = append(out, a.lost(Absent, a.Kind))
		}
	}
	for _, b := range was {
		if b.Kind != watchOutside { // a link removed: a change of its own
			out = append(out, b.lost(b.Kind, Absent))
		}
	}
	return out
}

// lost is the Change of w's path from the state of kind before to after.
func (w watch) lost(before, after string) Change {
	c := Change{Path: w.Path, Before: State{Kind: before}, After: State{Kind: after}}
	what := c.What()
	switch w.Kind {
	case watchRepo:
		c.Lost = fmt.Sprintf("the git repository's own state (HEAD, refs, index or config) was %s by the call, and a snapshot holds no repository", what)
	case watchLarge:
		c.Lost = fmt.Sprintf("an ignored path too large for a snapshot (over %d entries or %d MiB) was %s by the call", ignoredDirLimit, ignoredFileLimit>>20, what)
	case watchOutside:
		c.Lost = fmt.Sprintf("the call wrote through the symbolic link to %s, outside the project, where a restore never writes", strconv.Quote(w.Target))
	}
	return c
}

// indexPrint tells one staging of a git index from another: each entry's
// mode, object id, flags and path, not the stat data git rewrites when it
// refreshes the index (git status, git describe --dirty). An index it
// cannot read is told by its stat data.
func indexPrint(name string) string {
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	if sum, ok := indexEntries(data); ok {
		return sum
	}
	d, _ := statFollow(name)
	return printOf(d)
}

// indexEntries hashes the entries of an index of version 2, 3 or 4 (SHA-1
// object ids).
func indexEntries(data []byte) (string, bool) {
	const statLen, oidLen = 40, 20
	if len(data) < 12 || string(data[:4]) != "DIRC" {
		return "", false
	}
	version, count := binary.BigEndian.Uint32(data[4:8]), binary.BigEndian.Uint32(data[8:12])
	if version < 2 || version > 4 {
		return "", false
	}
	h := sha1.New()
	at := 12
	var path []byte
	for range count {
		start := at
		if at+statLen+oidLen+2 > len(data) {
			return "", false
		}
		mode := data[at+24 : at+28]
		at += statLen
		oid := data[at : at+oidLen]
		at += oidLen
		flags := binary.BigEndian.Uint16(data[at:])
		at += 2
		if version >= 3 && flags&0x4000 != 0 {
			at += 2
		}
		if version == 4 {
			strip, n := binary.Uvarint(data[min(at, len(data)):])
			if n <= 0 || strip > uint64(len(path)) {
				return "", false
			}
			at += n
			path = path[:len(path)-int(strip)]
		} else {
			path = path[:0]
		}
		end := bytes.IndexByte(data[min(at, len(data)):], 0)
		if end < 0 {
			return "", false
		}
		path = append(path, data[at:at+end]...)
		at += end + 1
		if version < 4 {
			at = start + (at-start+7)/8*8 // NUL padding to a multiple of 8
		}
		h.Write(mode)
		h.Write(oid)
		binary.Write(h, binary.BigEndian, flags)
		h.Write(path)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), true
}
