package scale_test

import (
	"os"
	"syscall"
)

// maxRSS is a finished child's peak resident memory in bytes (Linux's
// ru_maxrss counts kilobytes).
func maxRSS(ps *os.ProcessState) int64 {
	if u, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return u.Maxrss << 10
	}
	return 0
}
