//go:build unix

package hosts

import (
	"io/fs"
	"syscall"
)

// inode is the inode number of the file fi describes, 0 when unknown.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
