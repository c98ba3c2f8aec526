package proxy

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/undolog/undolog/internal/mcpwire"
)

// refusal is a client message the proxy does not pass on: answer is what
// the client gets (nil for a notification or a response, which JSON-RPC
// does not answer), note why, for the diagnostics.
type refusal struct {
	answer []byte
	note   string
}

// jsonrpcMembers are the members a JSON-RPC 2.0 message may have: the MCP
// SDK for JavaScript reads a message with any other as none at all, and
// answers nothing.
var jsonrpcMembers = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true}

// readClientMessage is the one reading of a message from the client, the
// door every transport's messages (and each element of a batch) come in
// by: a message the upstream server would read another way than the proxy
// (a repeated key, keys one but for case, a member a server ignores, bytes
// not UTF-8), or would not answer (not JSON-RPC 2.0, an id it cannot read,
// params not an object), is refused, never passed on.
func readClientMessage(line []byte) (message, *refusal) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(line, &members); err != nil {
		var notObject *json.UnmarshalTypeError
		if errors.As(err, &notObject) {
			return message{}, &refusal{answer: errorResponse(nil, codeInvalidRequest, "invalid request: a JSON-RPC message is an object"), note: "a client message that is not an object"}
		}
		id, code, text := unparsed(line, err)
		return message{}, &refusal{answer: errorResponse(id, code, text), note: text}
	}
	rawID, hasID := members["id"]
	_, hasMethod := members["method"]
	// The id answered: none when the id is what is unclear ("ID", or two
	// ids). A message that may be a request is answered (idUnclear).
	var id json.RawMessage
	if hasID && mcpwire.ValidRequestID(rawID) {
		id = rawID
	}
	idUnclear := false
	refuse := func(code int, text string) (message, *refusal) {
		r := &refusal{note: text}
		if hasMethod && hasID || !hasMethod && !hasID || idUnclear {
			// A request, or a message that is neither request nor
			// response (JSON-RPC answers it with id null).
			r.answer = errorResponse(id, code, text)
		}
		return message{}, r
	}
	if te := mcpwire.TextReadTwoWays(line); te != nil {
		return refuse(codeInvalidRequest, "invalid request: "+te.Error()+"; it was not passed on")
	}
	if ke := mcpwire.RepeatedKey(line); ke != nil {
		if ke.TopLevel() && strings.EqualFold(ke.Key, "id") {
			id, idUnclear = nil, true
		}
		code := codeInvalidRequest
		if strings.HasPrefix(ke.Path, "params") {
			code = codeInvalidParams
		}
		return refuse(code, "invalid request: "+ke.Error()+"; it was not passed on")
	}
	for k := range members {
		if jsonrpcMembers[k] {
			continue
		}
		for name := range jsonrpcMembers {
			if strings.EqualFold(k, name) {
				if name == "id" {
					id, idUnclear = nil, true
				}
				return refuse(codeInvalidRequest, "invalid request: "+(&mcpwire.KeyError{Key: k, Other: name, Field: true}).Error()+"; it was not passed on")
			}
		}
		return refuse(codeInvalidRequest, "invalid request: "+quote(k)+" is not a member of a JSON-RPC 2.0 message; it was not passed on")
	}
	var version string
	if json.Unmarshal(members["jsonrpc"], &version) != nil || version != "2.0" {
		return refuse(codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if hasID && id == nil {
		if hasMethod {
			return refuse(codeInvalidRequest, "invalid request: the id "+oneLineID(rawID)+" is not a string or a number a server reads exactly (an integer of at most 2^53-1 either way)")
		}
		return refuse(codeInvalidRequest, "invalid response: the id "+oneLineID(rawID)+" is not one of a request")
	}
	if hasMethod {
		var method string
		if json.Unmarshal(members["method"], &method) != nil || method == "" {
			return refuse(codeInvalidRequest, `invalid request: "method" must be a string, not empty`)
		}
		if params, ok := members["params"]; ok && params[0] != '{' {
			// JSON-RPC allows an array too, but no MCP method takes one,
			// and the MCP SDK for JavaScript answers no request with one.
			return refuse(codeInvalidRequest, `invalid request: "params" must be an object`)
		} else if text := unreadableMeta(params); text != "" {
			return refuse(codeInvalidParams, "invalid params: "+text)
		}
		if _, ok := members["result"]; ok {
			return refuse(codeInvalidRequest, `invalid request: a request has no "result"`)
		}
		if _, ok := members["error"]; ok {
			return refuse(codeInvalidRequest, `invalid request: a request has no "error"`)
		}
	} else {
		_, hasResult := members["result"]
		e, hasError := members["error"]
		_, hasParams := members["params"]
		switch {
		case !hasID:
			return refuse(codeInvalidRequest, `invalid request: neither a request (no "method") nor a response (no "id")`)
		case hasResult == hasError:
			idUnclear = true // not a response: its sender may wait for an answer
			return refuse(codeInvalidRequest, `invalid request: a message with an id and no "method" is a response, with a "result" or an "error"`)
		case hasParams:
			return refuse(codeInvalidRequest, `invalid request: a response has no "params"`)
		case hasError && e[0] != '{':
			return refuse(codeInvalidRequest, `invalid response: "error" must be an object`)
		}
	}
	var m message // its members are known exactly now: a plain decode reads them so
	if err := json.Unmarshal(line, &m); err != nil {
		return refuse(codeInvalidRequest, "invalid request: "+err.Error())
	}
	m.raw = line
	return m, nil
}

// relatedTaskKey is the key of _meta that names the task a message is
// part of (MCP 2025-11-25).
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// unreadableMeta says what in params' _meta (params an object, or none)
// the MCP SDK for JavaScript reads as no message at all, dropping it
// unanswered: _meta not an object, a progressToken not a string or an
// integer of at most 2^53-1, a related task with no taskId string; "" if
// none of these.
func unreadableMeta(params json.RawMessage) string {
	var members map[string]json.RawMessage // keys as sent, as the SDK reads them
	if len(params) == 0 || json.Unmarshal(params, &members) != nil || members["_meta"] == nil {
		return ""
	}
	var meta map[string]json.RawMessage
	if m := members["_meta"]; m[0] != '{' || json.Unmarshal(m, &meta) != nil {
		return `"params._meta" must be an object`
	}
	if token, ok := meta["progressToken"]; ok && !mcpwire.ValidRequestID(token) {
		return `"params._meta.progressToken" must be a string or an integer of at most 2^53-1`
	}
	if task, ok := meta[relatedTaskKey]; ok {
		var related map[string]json.RawMessage
		if task[0] != '{' || json.Unmarshal(task, &related) != nil || len(related["taskId"]) == 0 || related["taskId"][0] != '"' {
			return `"params._meta.` + relatedTaskKey + `" must be an object with a string "taskId"`
		}
	}
	return ""
}

// quote is s as a JSON string (as a message quotes a key).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// decodeParams reads a request's params into v as readClientMessage reads
// a message (mcpwire.Unmarshal); the error says where in the message.
func decodeParams(params json.RawMessage, v any) error {
	err := mcpwire.Unmarshal(params, v)
	var ke *mcpwire.KeyError
	if errors.As(err, &ke) {
		k := *ke
		k.Path = strings.TrimSuffix("params."+k.Path, ".")
		return &k
	}
	return err
}
