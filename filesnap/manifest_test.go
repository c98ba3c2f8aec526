package filesnap

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// A manifest reads back as it was written, and a cut one is an error,
// never a shorter manifest taken as the project's state.
func TestManifestRoundTripAndDamage(t *testing.T) {
	s := &Store{Dir: t.TempDir(), Project: t.TempDir()}
	m := &manifest{start: 1700000000123456789,
		entries: []entry{
			{path: "a.txt", kind: 'f', mode: 0o644, blob: [20]byte{1, 2, 3}, size: 12, mtime: 1699999999000000001, ctime: 1699999999000000002, ino: 42},
			{path: "dir/link", kind: 'l', blob: [20]byte{19: 9}, size: 6, mtime: 5, ctime: 6, ino: 1 << 40},
		},
		dirs:    []string{"dir", "dir/é"},
		ignored: []string{"node_modules"},
		watches: []watch{{Path: ".git", Kind: watchRepo, Print: "abc"}, {Path: "out", Kind: watchLarge, Target: "/x", Print: "p", Mtime: 77}},
	}
	if err := s.saveManifest("m", m); err != nil {
		t.Fatal(err)
	}
	got, err := s.loadManifest("m")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("read back:\n%+v\nwritten:\n%+v", got, m)
	}
	data, err := os.ReadFile(s.manifestPath("m"))
	if err != nil {
		t.Fatal(err)
	}
	for n := len(manifestMagic); n < len(data); n++ {
		if err := os.WriteFile(s.manifestPath("cut"), data[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := s.loadManifest("cut"); err == nil {
			t.Fatalf("the manifest cut to %d of %d bytes read without an error: %+v", n, len(data), got)
		}
	}
}

// Blobs written one after another (the zlib writer kept between them)
// are each the loose object git reads.
func TestBlobsAreGitObjects(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blobs := [][]byte{[]byte("first\n"), bytes.Repeat([]byte("a longer second blob\n"), 5000), {}, []byte("third\x00binary")}
	for _, data := range blobs {
		if err := s.writeBlob(blobID(data), data); err != nil {
			t.Fatal(err)
		}
	}
	for _, data := range blobs {
		out, err := exec.Command("git", "--git-dir", s.gitDir(), "cat-file", "blob", blobID(data)).Output()
		if err != nil {
			t.Fatalf("git cat-file of a blob of %d bytes: %v", len(data), err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("git reads %d bytes where %d were written", len(out), len(data))
		}
	}
}

// The next scan's stat cache is the last After's manifest (an earlier
// undolog's store named it in latest): a file whose stat data is as
// cached is not read again, and a store keeps one manifest between calls.
func TestLastScanIsTheCache(t *testing.T) {
	dir := project(t)
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{"kept.txt", "changed.txt"} {
		write(t, dir, name, "first "+name, 0o644)
		os.Chtimes(filepath.Join(dir, name), old, old)
	}
	shellCall(t, dir, func() {})
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	manifests := func() []string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(s.Dir, "manifests"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	if got := manifests(); !slices.Equal(got, []string{lastScanName}) {
		t.Fatalf("manifests after a call: %v", got)
	}
	// A blob gone from the store comes back only if its file is read.
	kept := s.objectPath(blobID([]byte("first kept.txt")))
	if err := os.Remove(kept); err != nil {
		t.Fatal(err)
	}
	got := shellCall(t, dir, func() { write(t, dir, "changed.txt", "second", 0o644) })
	if !maps.Equal(got, map[string]string{"changed.txt": "modified"}) {
		t.Fatalf("changes: %v", got)
	}
	if _, err := os.Stat(kept); err == nil {
		t.Fatal("a file whose stat data was as the last scan's was read again")
	}

	// A Before whose After never runs leaves the cache as it was.
	if _, err := Before(dir, nil); err != nil {
		t.Fatal(err)
	}
	got = shellCall(t, dir, func() { write(t, dir, "new.txt", "new", 0o644) })
	if !maps.Equal(got, map[string]string{"new.txt": "created"}) {
		t.Fatalf("changes after an abandoned Before: %v", got)
	}
	if _, err := os.Stat(kept); err == nil {
		t.Fatal("a file whose stat data was as the last scan's was read again after an abandoned Before")
	}

	// An earlier undolog's store: latest names an After's manifest.
	for _, name := range manifests() {
		if name != lastScanName {
			os.Remove(filepath.Join(s.Dir, "manifests", name))
		}
	}
	legacy := "0123456789abcdef01234567.after"
	if err := os.Rename(s.manifestPath(lastScanName), s.manifestPath(legacy)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "latest"), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := shellCall(t, dir, func() {}); len(got) != 0 {
		t.Fatalf("changes of a call that changed nothing: %v", got)
	}
	if _, err := os.Stat(kept); err == nil {
		t.Fatal("the manifest an earlier store named latest was not taken as the cache")
	}
	if got := manifests(); !slices.Equal(got, []string{lastScanName}) {
		t.Fatalf("manifests once an earlier store's latest is replaced: %v", got)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "latest")); err == nil {
		t.Fatal("an earlier store's latest is left")
	}
}
