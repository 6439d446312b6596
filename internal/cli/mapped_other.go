//go:build !linux

package cli

import (
	"errors"
	"os"
)

// mapFile does not map files here: inputs are read.
func mapFile(*os.File, int) ([]byte, func(), error) {
	return nil, nil, errors.New("inputs are not mapped on this system")
}

// dropPages does nothing here: no input is mapped.
func dropPages([]byte) {}
