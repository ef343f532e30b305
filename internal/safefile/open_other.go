//go:build !unix

package safefile

import "os"

// openNonBlocking opens path for reading. Outside Unix there are no named
// pipes in the file system to block on.
func openNonBlocking(path string) (*os.File, error) {
	return os.Open(path)
}
