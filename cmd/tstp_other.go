//go:build !unix

package cmd

import "context"

// letGoOnStop: no job control here.
func letGoOnStop(context.Context, *Factory) {}
