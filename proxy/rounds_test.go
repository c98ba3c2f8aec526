package proxy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocol2026 is the MCP version of multi round-trip requests.
const protocol2026 = "2026-07-28"

var (
	sdkServerOnce sync.Once
	sdkServerPath string
	sdkServerErr  error
)

// sdkServer returns the path of testdata/sdkserver (the Go SDK test
// server), built once per test binary.
func sdkServer(t testing.TB) string {
	t.Helper()
	sdkServerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "undolog-sdkserver-")
		if err != nil {
			sdkServerErr = err
			return
		}
		sdkServerPath = filepath.Join(dir, "sdkserver")
		if out, err := exec.Command("go", "build", "-o", sdkServerPath, "./testdata/sdkserver").CombinedOutput(); err != nil {
			sdkServerErr = err
			t.Logf("%s", out)
		}
	})
	if sdkServerErr != nil {
		t.Fatal("build testdata/sdkserver:", sdkServerErr)
	}
	return sdkServerPath
}

// sdkPolicy classifies the test server's tools.
const sdkPolicy = `tools:
  write:
    tier: compensable
    compensate: {tool: delete, args: {key: "{{ .args.key }}"}}
  confirmed_write:
    tier: compensable
    compensate: {tool: delete, args: {key: "{{ .args.key }}"}}
  confirmed_launch: {tier: irreversible}
  launch: {tier: irreversible}
  delete: {tier: irreversible}
`

// sdkHarness is a harness whose server is the Go SDK test server, its
// state in stateDir, its policy sdkPolicy.
func sdkHarness(t *testing.T) (h *harness, stateDir string) {
	h = newHarness(t)
	stateDir = filepath.Join(h.dir, "state")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "SDKSERVER_DIR="+stateDir)
	h.policy = filepath.Join(h.dir, "policy.yaml")
	if err := os.WriteFile(h.policy, []byte(sdkPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	return h, stateDir
}

// sdkClient connects a Go SDK client at version through argv; its
// elicitation handler answers action and counts the requests in asked.
func sdkClient(h *harness, argv []string, version, action string, asked *atomic.Int64) *mcp.ClientSession {
	h.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = h.env
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "rounds-agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: action}, nil
		},
	})
	s, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { s.Close() })
	return s
}

// journal is what the test server did, one line an act.
func journal(t *testing.T, stateDir string) []string {
	b, err := os.ReadFile(filepath.Join(stateDir, "writes.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

func TestSDKServerAsksForInputDirectly(t *testing.T) {
	for _, version := range []string{protocol2026, "2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			h, state := sdkHarness(t)
			var asked atomic.Int64
			s := sdkClient(h, []string{sdkServer(t)}, version, "accept", &asked)
			if got := s.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			r := call(t, s, "confirmed_write", map[string]any{"key": "k", "value": "v"})
			if r.IsError || asked.Load() != 1 {
				t.Fatalf("asked %d times: %s", asked.Load(), text(r))
			}
			if j := journal(t, state); len(j) != 1 || j[0] != "write_k=v" {
				t.Fatalf("journal %v", j)
			}
		})
	}
}
