//go:build !linux

package plan

import "unsafe"

// populate does nothing where pages cannot be faulted in at once.
func populate(unsafe.Pointer, uintptr) {}
