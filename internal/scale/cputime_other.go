//go:build !unix

package scale

import "time"

// CPUTime is 0: this system has no getrusage.
func CPUTime() time.Duration { return 0 }
