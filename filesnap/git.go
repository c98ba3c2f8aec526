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
)

var notADirectory = syscall.ENOTDIR

// storeConfig is the private store's git configuration, which git uses
// only to tell ignored paths (check-ignore): no excludes but the
// project's own .gitignore files.
var storeConfig = [][2]string{
	{"core.excludesFile", os.DevNull},
	{"core.hooksPath", os.DevNull},
}

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
	return os.Mkdir(filepath.Join(s.Dir, "snapshots"), 0o700)
}

func (s *Store) gitDir() string { return filepath.Join(s.Dir, "git") }

// git runs git on the store, the project its work tree, with none of the
// caller's git environment or configuration: it can reach no other
// repository.
func (s *Store) git(args ...string) ([]byte, error) {
	return s.gitInput(nil, args...)
}

// gitInput runs git with input on its stdin; a check-ignore that finds
// nothing ignored (exit 1) is no error.
func (s *Store) gitInput(input []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	}
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
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 && args[0] == "check-ignore" && stderr.Len() == 0 {
		return out, nil
	}
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

// checkIgnore is which of paths the project's .gitignore files leave
// out, as git decides.
func (s *Store) checkIgnore(paths []string) ([]string, error) {
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString(p)
		in.WriteByte(0)
	}
	out, err := s.gitInput(in.Bytes(), "check-ignore", "--no-index", "-z", "--stdin")
	if err != nil {
		return nil, err
	}
	var ignored []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			ignored = append(ignored, p)
		}
	}
	return ignored, nil
}

// hasExcludes tells whether the store's info/exclude (which git init
// copies from its templates: comments, as git ships them) has a pattern.
func (s *Store) hasExcludes() (bool, error) {
	data, err := os.ReadFile(filepath.Join(s.gitDir(), "info", "exclude"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(data)) {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
			return true, nil
		}
	}
	return false, nil
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

// readBlob is blob id's bytes.
func (s *Store) readBlob(id string) ([]byte, error) {
	f, err := os.Open(s.objectPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s is not in %s", id, s.gitDir())
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
