// Command sdkserver is the proxy tests' MCP server on the official Go SDK,
// over stdio or streamable HTTP, at every protocol version the SDK speaks
// ($SDKSERVER_VERSIONS, comma-separated, narrows them). Its state is a
// directory ($SDKSERVER_DIR): one file per key, a journal (writes.log) of
// every write, delete and launch it made, so that a test can count what
// ran, and the pid of every process started on it (pids). Tools:
//   - write {key, value}: writes the key (compensable: delete undoes it);
//   - set {key, value}: writes the key too, for a policy that captures the
//     value before (read) and sets it back;
//   - read {key}: the key's value, "" if none (read-only);
//   - delete {key}: removes the key;
//   - launch {name}: irreversible, appends to the journal only;
//   - confirmed_write {key, value}: asks for input first (an input_required
//     elicitation under 2026-07-28, which the SDK turns into an elicitation
//     request for older clients), then writes on accept; a decline is a tool
//     error and writes nothing;
//   - confirmed_launch {name}: launch, asking for input first as
//     confirmed_write does.
//
// The prompt "confirmed" and the resource sdkserver://confirmed ask for
// input the same way before they answer.
//
// With $SDKSERVER_LISTEN (host:port) it serves streamable HTTP there
// instead of stdio, its URL the first line of its output: a request under
// 2026-07-28 or later (its Mcp-Protocol-Version header) statelessly, as that
// version has it, any other with sessions, so that an older client can be
// asked for input there too.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type keyValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type keyOnly struct {
	Key string `json:"key"`
}

type launchArgs struct {
	Name string `json:"name"`
}

type written struct {
	Key     string `json:"key"`
	Existed bool   `json:"existed"`
}

func main() {
	dir := os.Getenv("SDKSERVER_DIR")
	if dir == "" {
		log.Fatal("sdkserver: SDKSERVER_DIR is not set")
	}
	if err := appendLine(filepath.Join(dir, "pids"), fmt.Sprint(os.Getpid())); err != nil {
		log.Fatal(err)
	}
	// The journal takes one line at a time: the SDK runs calls concurrently.
	var mu sync.Mutex
	journal := func(line string) error {
		mu.Lock()
		defer mu.Unlock()
		return appendLine(filepath.Join(dir, "writes.log"), line)
	}
	keyPath := func(key string) (string, error) {
		if key == "" || filepath.Base(key) != key || key == "writes.log" || key == "pids" {
			return "", fmt.Errorf("bad key %q", key)
		}
		return filepath.Join(dir, key), nil
	}
	write := func(kv keyValue) (*mcp.CallToolResult, written, error) {
		path, err := keyPath(kv.Key)
		if err != nil {
			return nil, written{}, err
		}
		_, statErr := os.Stat(path)
		if err := os.WriteFile(path, []byte(kv.Value), 0o644); err != nil {
			return nil, written{}, err
		}
		return nil, written{Key: kv.Key, Existed: statErr == nil}, journal("write " + kv.Key + "=" + kv.Value)
	}

	var opts mcp.ServerOptions
	if v := os.Getenv("SDKSERVER_VERSIONS"); v != "" {
		opts.SupportedProtocolVersions = strings.Split(v, ",")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "sdkserver", Version: "1"}, &opts)
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "write a key"},
		func(_ context.Context, _ *mcp.CallToolRequest, kv keyValue) (*mcp.CallToolResult, written, error) {
			return write(kv)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "set", Description: "set a key's value"},
		func(_ context.Context, _ *mcp.CallToolRequest, kv keyValue) (*mcp.CallToolResult, written, error) {
			return write(kv)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "a key's value", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, k keyOnly) (*mcp.CallToolResult, any, error) {
			path, err := keyPath(k.Key)
			if err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete", Description: "delete a key"},
		func(_ context.Context, _ *mcp.CallToolRequest, k keyOnly) (*mcp.CallToolResult, keyOnly, error) {
			path, err := keyPath(k.Key)
			if err != nil {
				return nil, k, err
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, k, err
			}
			return nil, k, journal("delete " + k.Key)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "launch", Description: "launch something that cannot be called back"},
		func(_ context.Context, _ *mcp.CallToolRequest, a launchArgs) (*mcp.CallToolResult, launchArgs, error) {
			return nil, a, journal("launch " + a.Name)
		})
	// confirmed asks "what?" of the user and, accepted, does act.
	confirmed := func(req *mcp.CallToolRequest, what string, act func() error) (*mcp.CallToolResult, error) {
		answer, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
					Message:         what + "?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
				}},
				RequestState: "confirm:" + what,
			}, nil
		}
		if answer.Action != "accept" {
			return nil, fmt.Errorf("not confirmed (%s): nothing done", answer.Action)
		}
		return nil, act()
	}
	mcp.AddTool(s, &mcp.Tool{Name: "confirmed_write", Description: "write a key once the user confirms"},
		func(_ context.Context, req *mcp.CallToolRequest, kv keyValue) (*mcp.CallToolResult, written, error) {
			var out written
			r, err := confirmed(req, "write "+kv.Key, func() (err error) {
				_, out, err = write(kv)
				return err
			})
			return r, out, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "confirmed_launch", Description: "launch once the user confirms"},
		func(_ context.Context, req *mcp.CallToolRequest, a launchArgs) (*mcp.CallToolResult, launchArgs, error) {
			r, err := confirmed(req, "launch "+a.Name, func() error { return journal("launch " + a.Name) })
			return r, a, err
		})
	// asking is the input request of a prompt or resource read without its
	// answer, nil once answered.
	asking := func(responses mcp.InputResponseMap, what string) (mcp.InputRequestMap, string) {
		if _, ok := responses["confirm"].(*mcp.ElicitResult); ok {
			return nil, ""
		}
		return mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Message:         what + "?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		}}, "confirm:" + what
	}
	s.AddPrompt(&mcp.Prompt{Name: "confirmed"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if ask, state := asking(req.Params.InputResponses, "prompt"); ask != nil {
			return &mcp.GetPromptResult{InputRequests: ask, RequestState: state}, nil
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "confirmed prompt"}}}}, nil
	})
	s.AddResource(&mcp.Resource{Name: "confirmed", URI: "sdkserver://confirmed"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if ask, state := asking(req.Params.InputResponses, "resource"); ask != nil {
			return &mcp.ReadResourceResult{InputRequests: ask, RequestState: state}, nil
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "sdkserver://confirmed", Text: "confirmed resource"}}}, nil
	})
	if addr := os.Getenv("SDKSERVER_LISTEN"); addr != "" {
		serveHTTP(s, addr)
		return
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// serveHTTP serves s over streamable HTTP on addr (host:port; port 0 picks
// one), and prints its URL as its first line of output. The SDK serves
// 2026-07-28 only statelessly, and asks a client for input only in a
// session, so a request goes to one handler or the other by its version.
func serveHTTP(s *mcp.Server, addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	server := func(*http.Request) *mcp.Server { return s }
	stateless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Stateless: true})
	sessions := mcp.NewStreamableHTTPHandler(server, nil)
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})))
}

func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, line)
	return err
}
