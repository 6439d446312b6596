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

// dropPages drops the pages of the mapped file b from the process's
// resident memory (MADV_DONTNEED). b stays mapped and reads the same: a
// page of a private mapping that was never written is read from the file
// again when touched.
func dropPages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }
