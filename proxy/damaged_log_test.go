package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/effectlog"
	"github.com/undolog/undolog/logaddr"
	sm "github.com/undolog/undolog/statemachine"
)

// A proxy in front of a log with a damaged page calls nothing: the call
// that would be logged is answered with the damage, the MCP server never
// gets it, and the log file and its journal stay byte for byte as they were
// (issue 28, item 5).
func TestProxyOverADamagedLogCallsNothing(t *testing.T) {
	h := newHarness(t)
	memoryServer(t)
	store := logaddr.File(h.logPath, logaddr.Options{})
	pad := strings.Repeat("x", 200)
	for i := 0; i < 100; i++ {
		args := `{"i":` + strconv.Itoa(i) + `,"pad":"` + pad + `"}`
		if i == 0 {
			args = `{"marker":"first-effect","pad":"` + pad + `"}`
		}
		if _, err := store.Intercept(t.Context(), effectlog.InterceptRequest{Session: "old", Tool: "w", Tier: sm.Compensable,
			Args: json.RawMessage(args), CreateSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	store.Close()
	// Every record once in the file, and one in the journal.
	h.cli("compact")
	h.cli("intercept", "--session", "old", "--tool", "w", "--tier", "compensable", "--args", `{"after":1}`)

	// Zero the page that holds the first effect, as a disk that lost a block would.
	data, err := os.ReadFile(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(data, []byte("first-effect")) != 1 {
		t.Fatal("the first effect is not in the file once")
	}
	pageSize := int(binary.LittleEndian.Uint32(data[24:])) // after the meta page's header, magic and version
	at := bytes.Index(data, []byte("first-effect")) / pageSize * pageSize
	clear(data[at : at+pageSize])
	if err := os.WriteFile(h.logPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(h.logPath + ".undolog-journal")
	if err != nil || len(journal) == 0 {
		t.Fatalf("journal: %d bytes, %v", len(journal), err)
	}

	agent := h.proxied("agent-1")
	alice := map[string]any{"entities": []entity{{Name: "alice", EntityType: "person", Observations: []string{"likes tea"}}}}
	res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_entities", Arguments: alice})
	answer := ""
	if err != nil {
		answer = err.Error()
	} else {
		answer = text(res)
	}
	if (err == nil && !res.IsError) || !strings.Contains(answer, h.logPath+` has a damaged "effects" bucket page`) {
		t.Fatalf("the call through a damaged log: %q", answer)
	}
	agent.Close()
	if memory, _ := os.ReadFile(h.dir + "/memory.jsonl"); bytes.Contains(memory, []byte("alice")) {
		t.Fatal("the MCP server got the call")
	}
	afterLog, _ := os.ReadFile(h.logPath)
	afterJournal, _ := os.ReadFile(h.logPath + ".undolog-journal")
	if !bytes.Equal(afterLog, data) || !bytes.Equal(afterJournal, journal) {
		t.Fatal("the log or its journal changed")
	}
}
