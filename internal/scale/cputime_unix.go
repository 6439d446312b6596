//go:build unix

package scale

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time the process has used, its threads together
// (garbage collection included): on a machine shared with other work,
// ratios of CPU times vary less than ratios of wall times. It is 0 where
// the system does not say.
func CPUTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
