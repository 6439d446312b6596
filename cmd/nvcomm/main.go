// Command nvcomm compiles sharded tensor programs (fusions) into
// communication plans, validates plans and simulates them. See README.md.
package main

import (
	"os"

	"github.com/nvcomm/nvcomm/internal/cli"
)

func main() { os.Exit(cli.Main()) }
