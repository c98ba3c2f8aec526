package mcpwire

import (
	"bytes"
	"encoding/json"
	"net/http"
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
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta.Version < StatelessVersion {
		return RequestMeta{}, false
	}
	return RequestMeta{Version: p.Meta.Version, ClientName: p.Meta.ClientInfo.Name}, true
}

// setStatelessHeaders sets the headers a request of msg needs under
// StatelessVersion or later (the version, the method, and the tool's or
// prompt's name or the resource's URI), as taken from msg itself, and
// returns its version; "" when msg is no such request, and header is
// unchanged.
func setStatelessHeaders(header http.Header, msg []byte) string {
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
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	json.Unmarshal(m.Params, &named)
	switch m.Method {
	case "tools/call", "prompts/get":
		header.Set("Mcp-Name", named.Name)
	case "resources/read":
		header.Set("Mcp-Name", named.URI)
	}
	return meta.Version
}
