package cli

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f read-only, its pages faulted in
// at once (MAP_POPULATE) rather than one fault at a time as they are read.
func mapFile(f *os.File, size int) ([]byte, func(), error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
