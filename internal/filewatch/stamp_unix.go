//go:build unix

package filewatch

import (
	"io/fs"
	"syscall"
)

// fileID is the device and inode of the file fi describes, 0 when unknown.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
