package manifest

import (
	"context"
	"errors"
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
	// bytes only while its document is parsed.
	Keep func(kind string) bool

	ctx   context.Context
	kept  int64
	files int
	objs  []Object
	// lastDocs counts the documents of the source being read.
	lastDocs int
}

// ErrEmpty is a source that holds no document: an empty stdin is what a
// failed command before a pipe leaves.
var ErrEmpty = errors.New("no objects: the input is empty or only comments (did the command that wrote it fail?)")

// Read reads every source in order: a file, a directory (its .json, .yaml
// and .yml files, sorted) or "-" for stdin. It returns the objects and the
// number of files read. A file or stdin named as a source with no
// document in it, or a directory with none in all its files, is ErrEmpty.
// It stops with ctx's error between documents when ctx ends (SIGTERM).
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
		return r.named(src, r.Stdin)
	}
	st, err := os.Stat(src)
	if err != nil {
		return &Error{Source: src, Err: unwrapPath(err)}
	}
	if !st.IsDir() {
		return r.file(src, true)
	}
	docs := 0
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
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
		before := r.files
		err = r.file(path, false)
		if r.files > before {
			docs += r.lastDocs
		}
		return err
	})
	if err == nil && docs == 0 {
		return &Error{Source: src, Err: fmt.Errorf("%w (no .json, .yaml or .yml file here holds one)", ErrEmpty)}
	}
	return err
}

func (r *Reader) file(path string, named bool) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return &Error{Source: path, Err: unwrapPath(err)}
	}
	defer f.Close()
	if named {
		return r.named(path, f)
	}
	_, err = r.parse(path, f)
	return err
}

// named parses a source the user named: it must hold a document.
func (r *Reader) named(src string, in io.Reader) error {
	n, err := r.parse(src, in)
	if err == nil && n == 0 {
		return &Error{Source: src, Err: ErrEmpty}
	}
	return err
}

// parse reads one source a document at a time within the limits, keeps
// its objects and returns its number of documents.
func (r *Reader) parse(src string, in io.Reader) (int, error) {
	if r.ctx == nil {
		r.ctx = context.Background()
	}
	lim := r.Limits
	r.files++
	r.lastDocs = 0
	d := newDocs(in, lim.MaxDocumentSize)
	for {
		if err := r.ctx.Err(); err != nil {
			return r.lastDocs, err
		}
		dc, err := d.next()
		if errors.Is(err, io.EOF) {
			return r.lastDocs, nil
		}
		if err != nil {
			return r.lastDocs, &Error{Source: src, Err: err}
		}
		if dc.bad != nil {
			return r.lastDocs, &Error{Source: src, Err: fmt.Errorf("document %d: invalid YAML: %s", dc.index, oneLine(dc.bad))}
		}
		r.lastDocs++
		if err := r.keep(src, dc, decode(dc, lim.MaxObjectSize)); err != nil {
			return r.lastDocs, err
		}
	}
}

// keep adds one document's objects, each with where it was read; objects
// whose kind Keep refuses lose their JSON and text.
func (r *Reader) keep(src string, d doc, objs []Object) error {
	lim := r.Limits
	var items Locator // a List's, parsed once for all its items
	rawKept := false
	for i, o := range objs {
		o.Source, o.Document, o.Line = src, d.index, d.line
		o.raw, o.rawLine = d.raw, d.rawLine
		if o.Item >= 0 {
			if i == 0 {
				items = o.Locator()
			}
			o.Line = items.FieldLine(o.Prefix())
		}
		if o.Err == nil && r.Keep != nil && !r.Keep(o.Kind) {
			o.JSON, o.raw = nil, nil
		}
		if o.large {
			o.raw = nil
		}
		r.kept += int64(len(o.JSON))
		if o.raw != nil && !rawKept {
			r.kept += int64(len(o.raw))
			rawKept = true
		}
		r.objs = append(r.objs, o)
	}
	if len(r.objs) > lim.MaxObjects {
		return &Error{Source: src, Document: d.index,
			Err: fmt.Errorf("more than %d objects in all: split the input", lim.MaxObjects)}
	}
	if r.kept > lim.MaxKeptSize {
		return &Error{Source: src, Document: d.index,
			Err: fmt.Errorf("the objects to check hold more than %d bytes in all: split the input", lim.MaxKeptSize)}
	}
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
