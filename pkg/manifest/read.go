package manifest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Stdin is the source name that reads standard input.
const Stdin = "-"

// Extensions are the file name endings a directory read takes, as kubectl.
var Extensions = []string{".json", ".yaml", ".yml"}

// Reader reads sources with a bound on memory.
type Reader struct {
	Limits Limits
	// Recursive descends into the subdirectories of a directory source.
	Recursive bool
	// Stdin is read for the source "-".
	Stdin io.Reader
	// Keep, when set, says which kinds the caller reads: other objects
	// are returned without JSON, so that a large ConfigMap costs its
	// bytes only while its file is parsed.
	Keep func(kind string) bool

	ctx   context.Context
	total int64
	files int
	objs  []Object
}

// Read reads every source in order: a file, a directory (its .json, .yaml
// and .yml files, sorted) or "-" for stdin. It returns the objects and the
// number of files read. It stops with ctx's error between files when ctx
// ends (SIGTERM).
func (r *Reader) Read(ctx context.Context, sources []string) ([]Object, int, error) {
	r.ctx = ctx
	for _, src := range sources {
		if err := r.source(src); err != nil {
			return nil, r.files, err
		}
	}
	return r.objs, r.files, nil
}

func (r *Reader) source(src string) error {
	if src == Stdin {
		if r.Stdin == nil {
			return &Error{Source: src, Err: fmt.Errorf("no standard input")}
		}
		return r.parse(src, r.Stdin)
	}
	st, err := os.Stat(src)
	if err != nil {
		return &Error{Source: src, Err: unwrapPath(err)}
	}
	if !st.IsDir() {
		return r.file(src)
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return &Error{Source: path, Err: unwrapPath(err)}
		}
		if d.IsDir() {
			if path != src && !r.Recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if !hasExtension(path) {
			return nil
		}
		return r.file(path)
	})
}

func (r *Reader) file(path string) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return &Error{Source: path, Err: unwrapPath(err)}
	}
	defer f.Close()
	return r.parse(path, f)
}

// parse reads one source within the limits and keeps its objects.
func (r *Reader) parse(src string, in io.Reader) error {
	lim := r.Limits
	data, err := io.ReadAll(io.LimitReader(in, lim.MaxFileSize+1))
	if err != nil {
		return &Error{Source: src, Err: fmt.Errorf("read: %w", err)}
	}
	if int64(len(data)) > lim.MaxFileSize {
		return &Error{Source: src, Err: fmt.Errorf("larger than %d bytes", lim.MaxFileSize)}
	}
	r.files++
	r.total += int64(len(data))
	if r.total > lim.MaxTotalSize {
		return &Error{Source: src, Err: fmt.Errorf("input is larger than %d bytes in all: split it", lim.MaxTotalSize)}
	}
	objs, err := parse(src, data, len(r.objs), lim.MaxObjects, r.Keep)
	if err != nil {
		return err
	}
	r.objs = append(r.objs, objs...)
	return nil
}

func hasExtension(path string) bool {
	for _, e := range Extensions {
		if strings.HasSuffix(path, e) {
			return true
		}
	}
	return false
}

// unwrapPath drops the operation and path an *fs.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
