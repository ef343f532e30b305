package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

var (
	// ErrTooLarge is a file over the limit, by its size or as read.
	ErrTooLarge = errors.New("file too large")
	// ErrNotRegular is a named pipe, device, socket or directory.
	ErrNotRegular = errors.New("not a regular file")
)

// Read reads path whole, at most limit bytes, and returns its data and
// what Stat said of it (for change detection: size, mtime, inode).
func Read(path string, limit int64) ([]byte, fs.FileInfo, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("read %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("read %q: %w (%s)", path, ErrNotRegular, Kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, nil, fmt.Errorf("read %q: %w (%d bytes), at most %d", path, ErrTooLarge, fi.Size(), limit)
	}
	data, err := ReadAtMost(f, limit, fi.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("read %q: %w", path, err)
	}
	return data, fi, nil
}

// ReadNamed reads a file an operator names on the command line (a config
// file, a certificate) whole, at most limit bytes. Unlike Read it opens
// the file as it is, so a pipe such as /dev/stdin works too.
func ReadNamed(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}

// ReadAtMost reads r to its end, at most limit bytes: more is ErrTooLarge.
// hint is the expected size (a file's); the buffer starts there, so a file
// read whole is held once, and grows only for a file that grows (or reports
// no size, as /proc files do).
func ReadAtMost(r io.Reader, limit, hint int64) ([]byte, error) {
	r = io.LimitReader(r, limit+1)
	buf := make([]byte, 0, min(max(hint+1, 512), limit+1))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("%w (it grew past %d bytes while read)", ErrTooLarge, limit)
	}
	return buf, nil
}

// Kind names the type of a file that is not a regular one.
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "type " + m.Type().String()
}
