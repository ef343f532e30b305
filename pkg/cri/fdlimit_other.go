//go:build !linux

package cri

// openFileLimit: no open-file limit is known here.
func openFileLimit() (uint64, bool) { return 0, false }
