// Command linked is undolog's binary with nothing to do: the same packages
// linked and initialised, the same code in it, and main printing a line
// unless it is given arguments (then it is undolog, which keeps that code
// linked). The benchmark times it beside `undolog version` and a static
// hello: what version costs above it is undolog's own work at start, what
// it costs above the hello is the price of the packages undolog is built
// of.
package main

import (
	"os"

	"github.com/undolog/undolog/cmd"
)

func main() {
	if len(os.Args) > 1 {
		os.Exit(cmd.Main())
	}
	os.Stdout.WriteString("undolog\n")
}
