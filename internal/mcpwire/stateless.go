package mcpwire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// StatelessVersion is the first MCP protocol version without initialize
// (2026-07-28, SEP-2575): each request names its protocol version, its
// client and the client's capabilities in its params' _meta, and over
// Streamable HTTP its version, method and name in headers. Versions are
// dates, so they compare as strings.
const StatelessVersion = "2026-07-28"

// The _meta keys of a request under StatelessVersion and later.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// RequestMeta is what a request under StatelessVersion or later says of
// its client in its _meta.
type RequestMeta struct {
	Version    string // its protocol version
	ClientName string // the name in its clientInfo, "" if none
	// FormElicitation: its capabilities let a server ask the client's
	// user by a form (see FormElicitation).
	FormElicitation bool
}

// ReadRequestMeta reads the _meta of a request's params; ok is false when
// they name no protocol version of StatelessVersion or later (a request
// of an older version, whose client said all this in initialize).
func ReadRequestMeta(params json.RawMessage) (meta RequestMeta, ok bool) {
	// Most messages are of older versions: they are not decoded twice.
	if !bytes.Contains(params, []byte(MetaProtocolVersion)) {
		return RequestMeta{}, false
	}
	var p struct {
		Meta struct {
			Version    string `json:"io.modelcontextprotocol/protocolVersion"`
			ClientInfo struct {
				Name string `json:"name"`
			} `json:"io.modelcontextprotocol/clientInfo"`
			Capabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta.Version < StatelessVersion {
		return RequestMeta{}, false
	}
	return RequestMeta{Version: p.Meta.Version, ClientName: p.Meta.ClientInfo.Name,
		FormElicitation: FormElicitation(p.Meta.Capabilities)}, true
}

// FormElicitation tells whether a client's capabilities (as its initialize
// or, from StatelessVersion on, each request's _meta gives them) let a
// server ask its user by a form: elicitation is declared, with form, or
// empty (a form, the only kind before 2025-11-25).
func FormElicitation(capabilities json.RawMessage) bool {
	var c struct {
		Elicitation *struct {
			Form json.RawMessage `json:"form"`
			URL  json.RawMessage `json:"url"`
		} `json:"elicitation"`
	}
	if len(capabilities) == 0 || json.Unmarshal(capabilities, &c) != nil || c.Elicitation == nil {
		return false
	}
	return c.Elicitation.Form != nil || c.Elicitation.URL == nil
}

// setStatelessHeaders sets the headers a request of msg needs under
// StatelessVersion or later (the version, the method, the tool's or
// prompt's name or the resource's URI, and a tool's arguments bound to
// headers), as taken from msg itself, and returns its version; "" when
// msg is no such request, and header is unchanged.
func setStatelessHeaders(header http.Header, msg []byte, params *paramHeaders) string {
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method == "" || len(m.ID) == 0 {
		return ""
	}
	meta, ok := ReadRequestMeta(m.Params)
	if !ok {
		return ""
	}
	header.Set("Mcp-Protocol-Version", meta.Version)
	header.Set("Mcp-Method", m.Method)
	var named struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(m.Params, &named)
	switch m.Method {
	case "tools/call":
		header.Set("Mcp-Name", named.Name)
		params.set(header, named.Name, named.Arguments)
	case "prompts/get":
		header.Set("Mcp-Name", named.Name)
	case "resources/read":
		header.Set("Mcp-Name", named.URI)
	}
	return meta.Version
}

// paramHeaders are the arguments each tool asks to have as headers too
// (an input schema's property marked "x-mcp-header", SEP-2243), learned
// from the tool lists the connection carried: under 2026-07-28 a server
// refuses a tools/call without them.
type paramHeaders struct {
	mu     sync.Mutex
	byTool map[string][]paramHeader
	asked  map[string]bool // the tools a list was asked for, unlisted till then
}

// paramHeader is one: the property's path in the arguments, and the
// header's name after Mcp-Param-.
type paramHeader struct {
	path []string
	name string
}

// learn keeps the bindings of each tool of a tools/list result (a page),
// and returns the cursor of the next page ("" if none, or the result is
// no tool list).
func (h *paramHeaders) learn(result json.RawMessage) (next string) {
	var r struct {
		Tools []struct {
			Name        string      `json:"name"`
			InputSchema schemaProps `json:"inputSchema"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if json.Unmarshal(result, &r) != nil || r.Tools == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range r.Tools {
		if h.byTool == nil {
			h.byTool = map[string][]paramHeader{}
		}
		h.byTool[t.Name] = t.InputSchema.bindings(nil, nil)
	}
	return r.NextCursor
}

// unlisted tells whether no tool list named tool, and none was asked for
// it yet: the caller asks for one (once).
func (h *paramHeaders) unlisted(tool string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.byTool[tool]; ok || h.asked[tool] {
		return false
	}
	if h.asked == nil {
		h.asked = map[string]bool{}
	}
	h.asked[tool] = true
	return true
}

// schemaProps is what of a JSON schema names headers.
type schemaProps struct {
	Header     string                 `json:"x-mcp-header"`
	Properties map[string]schemaProps `json:"properties"`
}

func (s schemaProps) bindings(path []string, out []paramHeader) []paramHeader {
	for name, p := range s.Properties {
		at := append(append([]string(nil), path...), name)
		if p.Header != "" {
			out = append(out, paramHeader{path: at, name: p.Header})
		}
		out = p.bindings(at, out)
	}
	return out
}

// set sets the Mcp-Param- headers of a tools/call of tool with these
// arguments: each bound argument present and a string, a boolean or an
// integer, encoded as SEP-2243 says.
func (h *paramHeaders) set(header http.Header, tool string, args json.RawMessage) {
	h.mu.Lock()
	bound := h.byTool[tool]
	h.mu.Unlock()
	for _, b := range bound {
		v := args
		for _, key := range b.path {
			var obj map[string]json.RawMessage
			if json.Unmarshal(v, &obj) != nil {
				v = nil
				break
			}
			v = obj[key]
		}
		if value, ok := headerValue(v); ok {
			header.Set("Mcp-Param-"+b.name, value)
		}
	}
}

// headerValue is an argument as a header's value: a string as it is,
// unless a header cannot carry it as it is (then base64 in =?base64?…?=);
// a boolean as true or false; an integer JavaScript holds exactly in
// decimal. Anything else has no header.
func headerValue(v json.RawMessage) (string, bool) {
	var x any
	if len(v) == 0 || json.Unmarshal(v, &x) != nil {
		return "", false
	}
	switch x := x.(type) {
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53-1 {
			return "", false
		}
		return strconv.FormatInt(int64(x), 10), true
	case string:
		if plainHeaderValue(x) {
			return x, true
		}
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(x)) + "?=", true
	}
	return "", false
}

// plainHeaderValue tells whether s goes in a header as it is: printable
// ASCII, no space or tab at either end, and not what reads as base64.
func plainHeaderValue(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return !(strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?="))
}
