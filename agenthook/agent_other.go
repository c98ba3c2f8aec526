//go:build !linux

package agenthook

import "os"

// agentPID is the agent's process: the hook's parent.
func agentPID() int { return os.Getppid() }
