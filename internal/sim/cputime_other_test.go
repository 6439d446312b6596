//go:build !unix

package sim_test

import "time"

// cpuTime is not measured here: the benchmarks report wall times alone.
func cpuTime() time.Duration { return 0 }
