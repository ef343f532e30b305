package filewatch

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
)

// RacyWindow is how close to now a file's mtime must be for its Stamp not
// to be trusted: a coarse file system (FAT: 2 s) can take a second write
// within the same mtime tick.
const RacyWindow = 2 * time.Second

// hashLimit bounds the content hash of a file whose stamp is not settled.
// A larger file is told by its stamp alone.
const hashLimit = 1 << 20

// Stamp tells one version of a file from the next without reading it. A
// rename over the file changes its device or inode, an in-place write its
// size or mtime, a chmod its mode. The zero Stamp is a missing file.
type Stamp struct {
	exists   bool
	dev, ino uint64
	mode     fs.FileMode
	size     int64
	mtime    int64 // Unix nanoseconds
}

// StampOf is the stamp of the file fi describes.
func StampOf(fi fs.FileInfo) Stamp {
	dev, ino := fileID(fi)
	return Stamp{exists: true, dev: dev, ino: ino, mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// Stat is the stamp of the file at path, following symlinks. A file that
// cannot be stat'ed has the zero Stamp.
func Stat(path string) Stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return Stamp{}
	}
	return StampOf(fi)
}

// Settled reports whether any later write changes the stamp. It does not
// while the mtime is within RacyWindow of now.
func (s Stamp) Settled(now time.Time) bool {
	return now.Sub(time.Unix(0, s.mtime)).Abs() >= RacyWindow
}

// version is what the poll compares: the stamp, and a hash of what the
// stamp does not show. For a directory that is its entries' names and
// stamps; for a file whose stamp is not settled, its content.
type version struct {
	st     Stamp
	sum    [sha256.Size]byte
	hashed bool
	racy   bool
}

// versionOf reads the version of path. prev is the last one: a file whose
// previous stamp was not settled is hashed once more, so a write in the
// same mtime tick as the last poll is still seen.
func versionOf(path string, prev version, now time.Time) version {
	v := version{st: Stat(path)}
	switch {
	case !v.st.exists:
	case v.st.mode.IsDir():
		v.sum, v.hashed = dirSum(path), true
	case v.st.mode.IsRegular():
		v.racy = !v.st.Settled(now)
		if v.racy || prev.racy {
			if data, _, err := safefile.Read(path, hashLimit); err == nil {
				v.sum, v.hashed = sha256.Sum256(data), true
			}
		}
	}
	return v
}

// changed reports whether v is another version than prev.
func (v version) changed(prev version) bool {
	return v.st != prev.st || v.hashed && prev.hashed && v.sum != prev.sum
}

// dirSum hashes the names and stamps of dir's entries, following their
// symlinks (a ConfigMap's files are links into its ..data directory).
func dirSum(dir string) [sha256.Size]byte {
	h := sha256.New()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		h.Write([]byte(e.Name()))
		h.Write([]byte{0})
		writeStamp(h, Stat(filepath.Join(dir, e.Name())))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func writeStamp(h hash.Hash, s Stamp) {
	var b [41]byte
	if s.exists {
		b[0] = 1
	}
	binary.LittleEndian.PutUint64(b[1:], s.dev)
	binary.LittleEndian.PutUint64(b[9:], s.ino)
	binary.LittleEndian.PutUint64(b[17:], uint64(s.mode))
	binary.LittleEndian.PutUint64(b[25:], uint64(s.size))
	binary.LittleEndian.PutUint64(b[33:], uint64(s.mtime))
	h.Write(b[:])
}
