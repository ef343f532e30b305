package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// readAhead is the buffer between a source and its document reader.
const readAhead = 64 << 10

// errDocumentSize stops a read inside a document over the limit.
var errDocumentSize = errors.New("document too large")

// budget caps the bytes read for one document, so that one document (a
// line without end, a List without end) cannot grow without bound. It
// also notes where each line ends, for the line of a JSON document.
type budget struct {
	r     io.Reader
	max   int64
	left  int64
	off   int64   // bytes read so far
	ends  []int64 // offsets of the '\n's not yet passed (lineAt)
	lines int     // '\n's passed
	json  bool    // note line ends
}

func (b *budget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errDocumentSize
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.json {
		for i, c := range p[:n] {
			if c == '\n' {
				b.ends = append(b.ends, b.off+int64(i))
			}
		}
	}
	b.off += int64(n)
	return n, err
}

// reset starts the budget of the next document. The read-ahead of the
// previous one is its slack.
func (b *budget) reset() { b.left = b.max + readAhead }

// lineAt is the 1-based line of offset off; later calls take a larger off.
func (b *budget) lineAt(off int64) int {
	i := 0
	for i < len(b.ends) && b.ends[i] < off {
		i++
	}
	b.lines += i
	b.ends = b.ends[i:]
	return b.lines + 1
}

// docs yields the documents of one source, one at a time: YAML documents
// separated by "---" lines, or a stream of JSON values.
type docs struct {
	b    *budget
	yaml *utilyaml.YAMLReader
	json *json.Decoder
	n    int // documents read
	line int // the file line the next YAML document starts at
}

func newDocs(in io.Reader, maxDoc int64) *docs {
	b := &budget{r: in, max: maxDoc, json: true}
	b.reset()
	br := bufio.NewReaderSize(b, readAhead)
	d := &docs{b: b, line: 1}
	if startsJSON(br) {
		d.json = json.NewDecoder(br)
	} else {
		b.json, b.ends = false, nil // YAML counts its own lines
		d.yaml = utilyaml.NewYAMLReader(br)
	}
	return d
}

// startsJSON peeks for a '{' as the first byte that is not blank.
func startsJSON(br *bufio.Reader) bool {
	head, _ := br.Peek(readAhead)
	t := bytes.TrimLeft(head, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// next is the next document that is not empty (blank, only comments, or
// null), or one that is not valid YAML (doc.bad); io.EOF after the last.
// Any other error ends the source.
func (d *docs) next() (doc, error) {
	for {
		d.b.reset()
		var dc doc
		var err error
		if d.json != nil {
			dc, err = d.nextJSON()
		} else {
			dc, err = d.nextYAML()
		}
		if err != nil || dc.json != nil || dc.bad != nil {
			return dc, err
		}
	}
}

// take counts a document just read (raw, or the read's err) and checks
// it: io.EOF after the last; a read error (prefixed by what) or a document
// over the size bound ends the source.
func (d *docs) take(raw []byte, err error, what string) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	d.n++
	if err != nil {
		return d.fail(err, what)
	}
	if int64(len(raw)) > d.b.max {
		return d.fail(errDocumentSize, "")
	}
	return nil
}

func (d *docs) nextJSON() (doc, error) {
	var raw json.RawMessage
	err := d.json.Decode(&raw)
	if err := d.take(raw, err, "invalid JSON: "); err != nil {
		return doc{}, err
	}
	line := d.b.lineAt(d.json.InputOffset() - int64(len(raw)))
	return doc{json: raw, index: d.n, line: line, raw: raw, rawLine: line}, nil
}

func (d *docs) nextYAML() (doc, error) {
	raw, err := d.yaml.Read()
	if err := d.take(raw, err, ""); err != nil {
		return doc{}, err
	}
	// Each line of raw ends in '\n'; the separator that ends it is one
	// more line (none at the end of the input, where it does not matter).
	rawLine := d.line
	d.line += bytes.Count(raw, []byte("\n")) + 1
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return doc{index: d.n, bad: err}, nil
	}
	if t := bytes.TrimSpace(js); bytes.Equal(t, []byte("null")) {
		return doc{index: d.n}, nil // blank, only comments, or null
	}
	return doc{json: js, index: d.n, line: rawLine + leadingLines(raw), raw: raw, rawLine: rawLine}, nil
}

// fail names the document an error is in.
func (d *docs) fail(err error, what string) error {
	if errors.Is(err, errDocumentSize) {
		err = fmt.Errorf("larger than %d bytes: the reader holds one document at a time, at most that", d.b.max)
	}
	return &streamError{doc: d.n, err: fmt.Errorf("%s%w", what, err)}
}

// streamError ends a source: it cannot be split past document doc.
type streamError struct {
	doc int
	err error
}

func (e *streamError) Error() string { return fmt.Sprintf("document %d: %v", e.doc, e.err) }
func (e *streamError) Unwrap() error { return e.err }

// Document is one document of a source that is not empty.
type Document struct {
	// Index counts the documents of the source from 1, empty ones too.
	Index int
	// Line is the 1-based line of its first content line.
	Line int
	// JSON is the document as JSON, nil when Err is set.
	JSON []byte
	// Err is why the document is not valid YAML. The next documents
	// are still read.
	Err error
}

// Documents reads the documents of in one at a time, each of at most
// maxDocument bytes, and calls fn with each that is not empty. Lists are
// not expanded. Any other problem ends the source: the error is an *Error
// naming the document, and the stream cannot be split past it.
func Documents(in io.Reader, maxDocument int64, fn func(Document)) error {
	d := newDocs(in, maxDocument)
	for {
		dc, err := d.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if se, ok := err.(*streamError); ok {
			return &Error{Document: se.doc, Err: se.err}
		}
		if err != nil {
			return &Error{Document: d.n, Err: err}
		}
		fn(Document{Index: dc.index, Line: dc.line, JSON: dc.json, Err: dc.bad})
	}
}
