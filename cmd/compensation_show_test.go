package cmd

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/undolog/undolog/internal/template"
	"github.com/undolog/undolog/logaddr"
	"github.com/undolog/undolog/model"
)

// show names an mcp compensation once ("mcp TOOL ARGS", not "mcp: mcp"),
// and show and undo cut a compensation that carries a whole file to a line
// (issue 15 item 15); a cases compensation shows its cases and the one the
// record selects.
func TestShowAndUndoCutLongCompensations(t *testing.T) {
	db := filepath.Join(t.TempDir(), "u.db")
	store := logaddr.File(db, logaddr.Options{})
	big := strings.Repeat("x", 5<<20)
	args, _ := json.Marshal(map[string]string{"path": "/f", "content": big})
	mcpID := committedEffect(t, store, &model.Compensation{Kind: model.CompensationMCP, Tool: "write_file", Args: args})
	cases, _ := json.Marshal(template.Cases{Cases: []template.Case{
		{When: ".capture.isError", Run: []string{"rm", "-f", "--", "{{ .args.name }}"}},
		{Tool: "write_file", Args: json.RawMessage(`{"path":"{{ .args.name }}","content":"{{ .capture.content[0].text }}"}`)},
	}})
	capture, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": big}}})
	casesID := committedCall(t, store, "write", `{"name":"y"}`, &model.Compensation{Kind: model.CompensationCases, Args: cases, Dir: "/work", Capture: capture})
	store.Close()

	code, out, stderr := undolog(t, db, "show", strconv.FormatUint(mcpID, 10))
	if code != 0 || !strings.Contains(out, "compensation: mcp write_file {") || strings.Contains(out, "mcp: mcp") || len(out) > 4096 {
		t.Fatalf("show %d: %d %.600s %s", mcpID, code, out, stderr)
	}
	code, out, stderr = undolog(t, db, "show", strconv.FormatUint(casesID, 10))
	if code != 0 || !strings.Contains(out, "compensation: 2 cases (in /work)") || !strings.Contains(out, "  1. when .capture.isError: rm -f -- '{{ .args.name }}'\n") ||
		!strings.Contains(out, "  2. otherwise: mcp write_file {") ||
		!regexp.MustCompile(`undo would: +mcp write_file {`).MatchString(out) || !strings.Contains(out, "bytes in all)") || len(out) > 4096 {
		t.Fatalf("show %d: %d %.2000s %s", casesID, code, out, stderr)
	}
	code, out, stderr = undolog(t, db, "undo", "s", "--dry-run")
	if code != 0 || !strings.Contains(out, "mcp write_file {") || !strings.Contains(out, "bytes in all)") || len(out) > 4096 {
		t.Fatalf("undo --dry-run: %d %.2000s %s", code, out, stderr)
	}
}
