// Package mcpclient is the MCP client undolog uses for the calls it makes
// itself (compensations during undo, policy init): it starts a server command,
// talks to it over stdio, lists and calls tools. It depends on no other
// undolog package, so the layers above (saga's callers, proxy, cmd) can all
// use it.
package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client is an MCP client session with an upstream server, for the calls
// undolog makes itself: compensations during undo, and policy init.
type Client struct {
	session *mcp.ClientSession
}

// Dial starts the server command and connects to it.
func Dial(ctx context.Context, argv []string) (*Client, error) { return DialIn(ctx, argv, "") }

// DialIn starts the server command in dir ("": this process's directory)
// and connects to it; an HTTP upstream (see Remote) is connected to over
// Streamable HTTP, its headers read from the environment again.
func DialIn(ctx context.Context, argv []string, dir string) (*Client, error) {
	if len(argv) == 0 {
		return nil, errors.New("no MCP server command")
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "undolog", Version: "1"}, nil)
	if r, ok, err := ParseRemote(argv); ok {
		if err != nil {
			return nil, err
		}
		header, err := r.Header(os.Getenv)
		if err != nil {
			return nil, err
		}
		t := &mcp.StreamableClientTransport{Endpoint: r.URL, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: headerTransport{base: http.DefaultTransport, header: header}}}
		s, err := c.Connect(ctx, t, nil)
		if err != nil {
			return nil, fmt.Errorf("connect to MCP server %s: %w", r.URL, err)
		}
		return &Client{session: s}, nil
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to MCP server %s: %w", strings.Join(argv, " "), err)
	}
	return &Client{session: s}, nil
}

// CallTool calls a tool; a tool error result is an error.
func (c *Client) CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	out, _ := json.Marshal(res)
	if res.IsError {
		return out, fmt.Errorf("%s: %s", name, ResultText(out))
	}
	return out, nil
}

// Tools lists the server's tools.
func (c *Client) Tools(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// Close ends the session and stops the server.
func (c *Client) Close() error { return c.session.Close() }

// ResultText is the text content of a tools/call result, cut to 300 bytes:
// what an error message quotes of a tool's failure.
func ResultText(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(result, &r)
	var b bytes.Buffer
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	s := b.String()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
