//go:build unix

package sim_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, its threads together: on
// a machine shared with other work, ratios of CPU times vary less than
// ratios of wall times.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
