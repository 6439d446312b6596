//go:build !linux

package scale_test

import "os"

// maxRSS is 0: ru_maxrss counts other units elsewhere, or is missing.
func maxRSS(*os.ProcessState) int64 { return 0 }
