package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/testbin"
)

// filesystemServer is the real @modelcontextprotocol/server-filesystem and
// the official TypeScript SDK, installed by .ci/run (UNDOLOG_MCP_FILESYSTEM
// names the server's executable, UNDOLOG_MCP_SDK_DIR the SDK's package).
func filesystemServer(t *testing.T) (server, sdk string) {
	server, sdk = os.Getenv("UNDOLOG_MCP_FILESYSTEM"), os.Getenv("UNDOLOG_MCP_SDK_DIR")
	if server == "" || sdk == "" {
		if os.Getenv("UNDOLOG_REQUIRE_MCP_FILESYSTEM") != "" {
			t.Fatal("UNDOLOG_MCP_FILESYSTEM or UNDOLOG_MCP_SDK_DIR is not set but UNDOLOG_REQUIRE_MCP_FILESYSTEM is")
		}
		t.Skip("UNDOLOG_MCP_FILESYSTEM and UNDOLOG_MCP_SDK_DIR not set: the filesystem server and the TypeScript SDK are not installed")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node: %v", err)
	}
	return server, sdk
}

type node struct {
	mode fs.FileMode
	data string
}

// tree is every file and directory under root: type, mode, bytes.
func tree(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		n := node{mode: fi.Mode()}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.data = string(b)
		}
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffTrees(want, got map[string]node) []string {
	var d []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			d = append(d, "missing "+p)
		case g.mode != w.mode:
			d = append(d, fmt.Sprintf("%s: mode %v, want %v", p, g.mode, w.mode))
		case g.data != w.data:
			d = append(d, fmt.Sprintf("%s: holds %q, want %q", p, g.data, w.data))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			d = append(d, "left behind "+p)
		}
	}
	return d
}

// TestFilesystemServerUndo: the shipped policy in front of the real
// filesystem server, driven by the official TypeScript SDK client: after
// writes (new, overwritten, binary), edits, a move, nested new directories,
// undo run from another directory brings the tree back byte for byte, modes
// included. The server's directory is relative ("scratch"): undo starts it
// where the proxy ran (issue 15 item 1).
func TestFilesystemServerUndo(t *testing.T) {
	server, sdk := filesystemServer(t)
	root := t.TempDir()
	work := filepath.Join(root, "work")
	scratch := filepath.Join(work, "scratch")
	for _, d := range []string{"sub", "empty"} {
		if err := os.MkdirAll(filepath.Join(scratch, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := []byte{0x89, 'P', 'N', 'G', 0, 0xff, 0xfe, 0x80, '\r', '\n', 0xc3, 0x28}
	files := map[string]struct {
		data string
		mode fs.FileMode
	}{
		"a.txt":        {"line one\nline two\n", 0o640},
		"bin.dat":      {string(bin), 0o600},
		"sub/keep.txt": {"keep me\n", 0o644},
		"script.sh":    {"#!/bin/sh\necho hi\n", 0o755},
	}
	for p, f := range files {
		if err := os.WriteFile(filepath.Join(scratch, p), []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(scratch, p), f.mode)
	}
	before := tree(t, scratch)
	abs := func(p string) string { return filepath.Join(scratch, p) }
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	calls := []call{
		{"write_file", map[string]any{"path": abs("new.txt"), "content": "brand new\n"}},
		{"write_file", map[string]any{"path": abs("a.txt"), "content": "overwritten\n"}},
		{"write_file", map[string]any{"path": abs("a.txt"), "content": "overwritten twice\n"}},
		{"write_file", map[string]any{"path": abs("bin.dat"), "content": "text now"}},
		{"edit_file", map[string]any{"path": abs("script.sh"), "edits": []map[string]string{{"oldText": "echo hi", "newText": "echo bye"}}}},
		{"edit_file", map[string]any{"path": abs("script.sh"), "edits": []map[string]string{{"oldText": "echo bye", "newText": "echo dry"}}, "dryRun": true}},
		{"create_directory", map[string]any{"path": abs("n1/n2/n3")}},
		{"write_file", map[string]any{"path": abs("n1/n2/n3/deep.txt"), "content": "deep\n"}},
		{"create_directory", map[string]any{"path": abs("sub")}},
		{"create_directory", map[string]any{"path": abs("empty/inner")}},
		{"move_file", map[string]any{"source": "sub/keep.txt", "destination": "n1/moved.txt"}},
		{"edit_file", map[string]any{"path": abs("n1/moved.txt"), "edits": []map[string]string{{"oldText": "keep", "newText": "moved"}}}},
		{"edit_file", map[string]any{"path": abs("missing.txt"), "edits": []map[string]string{{"oldText": "a", "newText": "b"}}}},
	}
	callsFile := filepath.Join(root, "calls.json")
	b, _ := json.Marshal(calls)
	os.WriteFile(callsFile, b, 0o644)

	logPath := filepath.Join(root, "undolog.db")
	policy, _ := filepath.Abs("../examples/filesystem-policy.yaml")
	script, _ := filepath.Abs("testdata/mcp-client.mjs")
	undolog := testbin.Undolog(t)
	proxyCmd, _ := json.Marshal([]string{undolog, "proxy", "--session", "fs-1", "--policy", policy, "--", server, "scratch"})
	env := append(os.Environ(), "UNDOLOG_LOG="+logPath, "UNDOLOG_ACTOR=tester", "UNDOLOG_MCP_SDK_DIR="+sdk,
		"MCP_CMD="+string(proxyCmd), "MCP_CWD="+work)
	client := exec.Command("node", script, callsFile)
	client.Env = env
	var stderr bytes.Buffer
	client.Stderr = &stderr
	out, err := client.Output()
	if err != nil {
		t.Fatalf("the client: %v\n%s", err, stderr.Bytes())
	}
	var results []struct {
		Name    string           `json:"name"`
		IsError bool             `json:"isError"`
		Content []map[string]any `json:"content"`
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Name    string           `json:"name"`
			IsError bool             `json:"isError"`
			Content []map[string]any `json:"content"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		results = append(results, r)
	}
	if len(results) != len(calls) {
		t.Fatalf("%d results for %d calls:\n%s\n%s", len(results), len(calls), out, stderr.Bytes())
	}
	for i, r := range results[:len(results)-1] {
		if r.IsError {
			t.Fatalf("call %d %s failed: %v", i, r.Name, r.Content)
		}
	}
	// The edit of a file that is not there: its capture failed, the call was
	// not made, and the server's own words reach the client.
	last := results[len(results)-1]
	if !last.IsError || len(last.Content) != 2 || !strings.Contains(fmt.Sprint(last.Content[1]["text"]), "ENOENT") {
		t.Fatalf("edit of a missing file: %+v", last)
	}
	if got, _ := os.ReadFile(abs("script.sh")); string(got) != "#!/bin/sh\necho bye\n" {
		t.Fatalf("script.sh: %q (the dry run changed it, or the edit did not happen)", got)
	}
	if d := diffTrees(before, tree(t, scratch)); len(d) == 0 {
		t.Fatal("the calls changed nothing")
	}

	// Undo from elsewhere: the server's relative directory must still mean
	// work/scratch.
	undo := exec.Command(undolog, "undo", "fs-1", "--yes")
	undo.Dir = root
	undo.Env = env
	if out, err := undo.CombinedOutput(); err != nil {
		t.Fatalf("undo: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "compensated") {
		t.Fatalf("undo: %s", out)
	}
	if d := diffTrees(before, tree(t, scratch)); len(d) > 0 {
		t.Fatalf("after undo the tree differs:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Stat(filepath.Join(root, "scratch")); err == nil {
		t.Fatal("undo made a scratch directory where it ran")
	}
}
