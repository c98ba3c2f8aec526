//go:build !unix

package cmd

import (
	"context"

	"github.com/undolog/undolog/effectlog"
)

// letGoOnStop: no job control here.
func letGoOnStop(context.Context, effectlog.Log) {}
