package filesnap

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"testing"
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
