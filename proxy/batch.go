package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/undolog/undolog/internal/mcpwire"
)

// batchesUntil is the first MCP protocol version without JSON-RPC batches:
// 2025-06-18 removed them ("the body of the POST request MUST be a single
// JSON-RPC request, notification, or response"; stdio likewise).
const batchesUntil = "2025-06-18"

// batchesAllowed tells whether a session that agreed on version may batch.
// Before initialize has been answered no version allows it (2025-03-26 also
// forbade batching the initialize request).
func batchesAllowed(version string) bool {
	return version != "" && version < batchesUntil
}

// batcher takes the JSON-RPC batches (JSON arrays) a client sends apart, so
// that each element is handled as the message it is (a tools/call in a batch
// goes through the policy like any other), and puts the answers to the
// batch's requests back together as one array, as JSON-RPC 2.0 says. When
// the protocol version in use has no batches, each request of a batch gets
// an Invalid Request error instead, and nothing of it is passed on.
type batcher struct {
	Conn
	queue [][]byte // elements of the last batch still to be read

	mu      sync.Mutex
	pending map[string]*batch // request id -> the batch waiting for its answer
	initID  string            // the initialize request's id, until answered
	version string            // the protocol version the server answered
}

type batch struct {
	want    map[string]bool
	answers []json.RawMessage
}

func newBatcher(c Conn) *batcher {
	return &batcher{Conn: c, pending: map[string]*batch{}}
}

// peek reads the id and method of a message, if it is an object.
func peek(msg []byte) (id json.RawMessage, method string, ok bool) { return mcpwire.Peek(msg) }

func (b *batcher) Read() ([]byte, error) {
	for {
		if len(b.queue) > 0 {
			msg := b.queue[0]
			b.queue = b.queue[1:]
			return msg, nil
		}
		msg, err := b.Conn.Read()
		if err != nil {
			return nil, err
		}
		if len(msg) == 0 || msg[0] != '[' {
			b.noteInitialize(msg)
			return msg, nil
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(msg, &elems); err != nil {
			// Nested deeper than the decoder goes, it is still a batch:
			// its elements are answered one by one.
			if _, code, _ := unparsed(msg, err); code != codeInvalidRequest {
				return msg, nil // not JSON: the handler answers -32700
			}
			if elems = splitArray(msg); elems == nil {
				return msg, nil
			}
		}
		if reply := b.take(elems); reply != nil {
			if err := b.Conn.Write(reply); err != nil {
				return nil, err
			}
		}
	}
}

func (b *batcher) noteInitialize(msg []byte) {
	if !bytes.Contains(msg, []byte(`"initialize"`)) {
		return
	}
	if id, method, ok := peek(msg); ok && method == "initialize" && len(id) > 0 {
		b.mu.Lock()
		b.initID = idKey(id)
		b.mu.Unlock()
	}
}

// take queues a batch's elements for Read, or refuses it; it returns what
// to answer at once, if anything.
func (b *batcher) take(elems []json.RawMessage) []byte {
	if len(elems) == 0 {
		return errorResponse(nil, codeInvalidRequest, "invalid request: an empty batch")
	}
	b.mu.Lock()
	version := b.version
	b.mu.Unlock()
	if !batchesAllowed(version) {
		return batchRefusal(version, elems)
	}
	bt := &batch{want: map[string]bool{}}
	b.mu.Lock()
	for _, e := range elems {
		m, refused := readClientMessage(e)
		switch {
		case refused != nil:
			// Refused here, not passed on to be refused: its answer
			// goes in the batch's, with the id it can be told by.
			if refused.answer != nil {
				bt.answers = append(bt.answers, refused.answer)
			}
			continue
		case m.Method != "" && len(m.ID) > 0:
			// Two requests with one id would get each other's answer, in
			// this batch or across batches still answered.
			if k := idKey(m.ID); bt.want[k] || b.pending[k] != nil {
				bt.answers = append(bt.answers, errorResponse(m.ID, codeInvalidRequest, "invalid request: the id "+string(m.ID)+" is used by a request still in flight"))
				continue
			} else {
				bt.want[k] = true
			}
		}
		b.queue = append(b.queue, append([]byte(nil), e...))
	}
	b.mu.Unlock()
	if len(bt.want) == 0 {
		if len(bt.answers) == 0 {
			return nil // only notifications and responses: nothing to answer
		}
		return encode(bt.answers)
	}
	b.mu.Lock()
	for id := range bt.want {
		b.pending[id] = bt
	}
	b.mu.Unlock()
	return nil
}

// splitArray is the elements of the JSON array msg, found without decoding
// them (see skipValue); nil if msg is not an array.
func splitArray(msg []byte) []json.RawMessage {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '[' {
		return nil
	}
	var elems []json.RawMessage
	for i = skipSpace(msg, i+1); i < len(msg) && msg[i] != ']'; {
		end := skipValue(msg, i)
		if end < 0 {
			return nil
		}
		elems = append(elems, msg[i:end])
		if i = skipSpace(msg, end); i < len(msg) && msg[i] == ',' {
			i = skipSpace(msg, i+1)
		}
	}
	return elems
}

// batchRefusal answers each request of a batch the protocol version in use
// does not allow with -32600 (never -32700: it is valid JSON).
func batchRefusal(version string, elems []json.RawMessage) []byte {
	if version == "" {
		version = "not yet agreed"
	}
	text := fmt.Sprintf("invalid request: JSON-RPC batches are not part of MCP protocol version %s (they were removed in %s); send each message on its own", version, batchesUntil)
	var answers []json.RawMessage
	for _, e := range elems {
		id, _, ok := peek(e)
		if ok && len(id) == 0 {
			continue // a notification or a response: not answered
		} else if !ok {
			id = topLevelID(e) // nested too deep to decode, say
		}
		answers = append(answers, errorResponse(id, codeInvalidRequest, text))
	}
	if len(answers) == 0 {
		return errorResponse(nil, codeInvalidRequest, text)
	}
	return encode(answers)
}

// Write holds an answer to a request of a batch until the batch's last
// answer, then writes them all as one array.
func (b *batcher) Write(msg []byte) error {
	b.mu.Lock()
	if len(b.pending) == 0 && b.initID == "" {
		b.mu.Unlock()
		return b.Conn.Write(msg)
	}
	id, method, ok := peek(msg)
	if !ok || method != "" || len(id) == 0 {
		b.mu.Unlock()
		return b.Conn.Write(msg)
	}
	if idKey(id) == b.initID {
		var r struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		json.Unmarshal(msg, &r)
		b.version, b.initID = r.Result.ProtocolVersion, ""
	}
	bt := b.pending[idKey(id)]
	if bt == nil {
		b.mu.Unlock()
		return b.Conn.Write(msg)
	}
	delete(b.pending, idKey(id))
	delete(bt.want, idKey(id))
	bt.answers = append(bt.answers, append(json.RawMessage(nil), bytes.TrimSpace(msg)...))
	done := len(bt.want) == 0
	b.mu.Unlock()
	if !done {
		return nil
	}
	return b.Conn.Write(encode(bt.answers))
}
