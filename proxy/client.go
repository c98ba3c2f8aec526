package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/undolog/undolog/saga"
)

// Client is an MCP client session with an upstream server, for the calls
// undolog makes itself: compensations during undo, and policy init.
type Client struct {
	session *mcp.ClientSession
}

var _ saga.ToolCaller = (*Client)(nil)

// Dial starts the server command and connects to it.
func Dial(ctx context.Context, argv []string) (*Client, error) {
	if len(argv) == 0 {
		return nil, errors.New("no MCP server command")
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "undolog", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(argv[0], argv[1:]...)}, nil)
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
		return out, fmt.Errorf("%s: %s", name, resultText(out))
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
