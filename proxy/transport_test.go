package proxy

import (
	"testing"

	"github.com/undolog/undolog/internal/mcpwire"
)

// The proxy's own bound on a message is the transports' bound: a message
// one lets through, the other does not drop.
func TestMessageBoundIsTheTransports(t *testing.T) {
	if maxLine != mcpwire.MaxMessage {
		t.Fatalf("proxy maxLine %d, mcpwire.MaxMessage %d", maxLine, mcpwire.MaxMessage)
	}
}
