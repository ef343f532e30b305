//go:build !linux

package nriplugin

import "os"

// openNoFollow opens path with flag (the plugin runs on Linux; elsewhere,
// for the tests of the packages that import it, without O_NOFOLLOW).
func openNoFollow(path string, flag int) (*os.File, error) { return os.OpenFile(path, flag, 0) }

// reserve does nothing outside Linux.
func reserve(*os.File, int64) error { return nil }
