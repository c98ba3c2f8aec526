// Command undolog makes tool calls transactional: see README.md.
package main

import (
	"os"

	"github.com/undolog/undolog/cmd"
)

func main() {
	os.Exit(cmd.Main())
}
