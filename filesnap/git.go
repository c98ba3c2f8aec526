package filesnap

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

var notADirectory = syscall.ENOTDIR

// storeConfig is the private store's git configuration: bytes as they are
// (no line-ending conversion), modes and symbolic links as they are, no
// automatic gc (blobs are read back as loose objects), the untracked
// cache so that a snapshot reads only directories that changed, and no
// excludes but the project's own .gitignore files.
var storeConfig = [][2]string{
	{"core.autocrlf", "false"},
	{"core.safecrlf", "false"},
	{"core.symlinks", "true"},
	{"core.filemode", "true"},
	{"core.untrackedCache", "true"},
	{"core.fsmonitor", "false"},
	{"core.excludesFile", os.DevNull},
	{"core.hooksPath", os.DevNull},
	{"core.quotePath", "false"},
	{"gc.auto", "0"},
	{"advice.addEmbeddedRepo", "false"},
}

// storeAttributes unset, for every path, what would make the blob differ
// from the file's bytes: a project's .gitattributes asking for line-ending
// conversion, filters (git-lfs) or encodings.
const storeAttributes = "* -text -eol -filter -ident -working-tree-encoding\n"

// init makes the store on first use.
func (s *Store) init() error {
	if _, err := os.Stat(filepath.Join(s.Dir, "snapshots")); err == nil {
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	if _, err := s.git("init", "-q"); err != nil {
		return err
	}
	for _, kv := range storeConfig {
		if _, err := s.git("config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(s.gitDir(), "info", "attributes"), []byte(storeAttributes), 0o600); err != nil {
		return err
	}
	return os.Mkdir(filepath.Join(s.Dir, "snapshots"), 0o700)
}

func (s *Store) gitDir() string { return filepath.Join(s.Dir, "git") }

// git runs git on the store, the project its work tree, with none of the
// caller's git environment or configuration: it can reach no other
// repository.
func (s *Store) git(args ...string) ([]byte, error) {
	for try := 0; ; try++ {
		out, err := s.gitOnce(args...)
		// Two snapshots of one project at once: the second waits for the
		// private index.
		if err != nil && try < 100 && strings.Contains(err.Error(), "index.lock") {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		return out, err
	}
}

func (s *Store) gitOnce(args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = s.Project
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"GIT_DIR="+s.gitDir(),
		"GIT_WORK_TREE="+s.Project,
		"GIT_INDEX_FILE="+filepath.Join(s.Dir, "index"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("git %s: %s", args[0], lastLine(msg))
		}
		return nil, fmt.Errorf("git %s: %v", args[0], err)
	}
	return out, nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// writeTree records the project's tree as it is now (its .gitignore'd
// files aside) and returns the tree's id.
func (s *Store) writeTree() (string, error) {
	if _, err := s.git("add", "--all", "--", "."); err != nil {
		return "", err
	}
	out, err := s.git("write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// diffTrees lists the paths whose state differs between two trees.
// Submodules (another repository inside the project) are not followed.
func (s *Store) diffTrees(before, after string) ([]Change, error) {
	out, err := s.git("diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", before, after)
	if err != nil {
		return nil, err
	}
	changes := []Change{}
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		// ":100644 100755 OLD NEW M", then the path.
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) != 5 {
			return nil, fmt.Errorf("git diff-tree: unreadable line %q", fields[i])
		}
		b, errB := treeState(meta[0], meta[2])
		a, errA := treeState(meta[1], meta[3])
		if errB != nil || errA != nil {
			continue // a submodule
		}
		changes = append(changes, Change{Path: fields[i+1], Before: b, After: a})
	}
	return changes, nil
}

// treeDirs are the directories of a tree, every level.
func (s *Store) treeDirs(tree string) (map[string]bool, error) {
	out, err := s.git("ls-tree", "-r", "-d", "--name-only", "-z", tree)
	if err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	for _, d := range strings.Split(string(out), "\x00") {
		if d != "" {
			dirs[d] = true
		}
	}
	return dirs, nil
}

var errSubmodule = errors.New("a submodule")

// treeState is a tree entry's state.
func treeState(mode, blob string) (State, error) {
	switch mode {
	case "000000":
		return State{Kind: Absent}, nil
	case "100644":
		return State{Kind: File, Blob: blob, Mode: 0o644, ExecOnly: true}, nil
	case "100755":
		return State{Kind: File, Blob: blob, Mode: 0o755, ExecOnly: true}, nil
	case "120000":
		return State{Kind: Symlink, Blob: blob}, nil
	}
	return State{}, errSubmodule
}

// objectPath is where a loose object lives.
func (s *Store) objectPath(id string) string {
	return filepath.Join(s.gitDir(), "objects", id[:2], id[2:])
}

// writeBlob stores data as the loose blob id, as git would.
func (s *Store) writeBlob(id string, data []byte) error {
	path := s.objectPath(id)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var buf bytes.Buffer
	z := zlib.NewWriter(&buf)
	fmt.Fprintf(z, "blob %d\x00", len(data))
	z.Write(data)
	if err := z.Close(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "tmp_obj_")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readBlob is blob id's bytes: a loose object read here, else (a file git
// streamed into a pack) git's.
func (s *Store) readBlob(id string) ([]byte, error) {
	f, err := os.Open(s.objectPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return s.git("cat-file", "blob", id)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := zlib.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %v", id, err)
	}
	raw, err := io.ReadAll(z)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %v", id, err)
	}
	head, data, ok := bytes.Cut(raw, []byte{0})
	if !ok || !bytes.HasPrefix(head, []byte("blob ")) || blobID(data) != id {
		return nil, fmt.Errorf("blob %s is damaged in %s", id, s.gitDir())
	}
	return data, nil
}
