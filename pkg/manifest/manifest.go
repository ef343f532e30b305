package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Limits bound what one read holds in memory.
type Limits struct {
	// MaxFileSize caps one file (or stdin), in bytes.
	MaxFileSize int64
	// MaxTotalSize caps all files together, in bytes.
	MaxTotalSize int64
	// MaxObjects caps the objects of all files, List items included.
	MaxObjects int
}

// DefaultLimits: a file as large as the API server takes a request body
// (3 MiB), 64 MiB in all, 10,000 objects.
var DefaultLimits = Limits{MaxFileSize: 3 << 20, MaxTotalSize: 64 << 20, MaxObjects: 10000}

// Object is one API object and where it was read.
type Object struct {
	// Source is the file path as given or found, or "-" for stdin.
	Source string
	// Document is the 1-based document number in Source.
	Document int
	// Line is the 1-based line of the document's first content line, or
	// of the item in a List.
	Line int
	// Item is the index in the document's List, or -1.
	Item int
	// APIVersion, Kind, Namespace and Name identify the object.
	APIVersion, Kind, Namespace, Name string
	// JSON is the object as JSON.
	JSON []byte

	// raw is the document's text, which starts at file line rawLine (0:
	// not known); Locator reads them.
	raw     []byte
	rawLine int
}

// Prefix is the field path of the object in its document: "items[3]" for
// a List item, "" otherwise.
func (o Object) Prefix() string {
	if o.Item < 0 {
		return ""
	}
	return fmt.Sprintf("items[%d]", o.Item)
}

// Error is input that cannot be used: it names the source and document.
type Error struct {
	Source   string
	Document int // 0 when the error is not in one document
	Err      error
}

func (e *Error) Error() string {
	src := e.Source
	if src == "-" {
		src = "stdin"
	}
	if e.Document > 0 {
		return fmt.Sprintf("%s: document %d: %v", src, e.Document, e.Err)
	}
	return fmt.Sprintf("%s: %v", src, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Parse splits data, read from source, into its objects: YAML documents
// separated by "---" lines, or a stream of JSON objects. Empty documents
// are dropped; Lists (kind List or *List with items) are expanded.
func Parse(source string, data []byte, maxObjects int) ([]Object, error) {
	return parse(source, data, 0, maxObjects, nil)
}

// parse is Parse for a read that already holds have objects; objects
// whose kind keep refuses are kept without their JSON and text.
func parse(source string, data []byte, have, maxObjects int, keep func(kind string) bool) ([]Object, error) {
	docs, err := split(data)
	if err != nil {
		return nil, &Error{Source: source, Err: err}
	}
	var objs []Object
	for _, d := range docs {
		got, err := decode(d)
		if err != nil {
			return nil, &Error{Source: source, Document: d.index, Err: err}
		}
		var items Locator // a List's, parsed once for all its items
		for i, o := range got {
			o.Source, o.Document, o.Line = source, d.index, d.line
			o.raw, o.rawLine = d.raw, d.rawLine
			if o.Item >= 0 {
				if i == 0 {
					items = o.Locator()
				}
				o.Line = items.FieldLine(o.Prefix())
			}
			if keep != nil && !keep(o.Kind) {
				o.JSON, o.raw = nil, nil
			}
			objs = append(objs, o)
		}
		if have+len(objs) > maxObjects {
			return nil, &Error{Source: source, Document: d.index,
				Err: fmt.Errorf("more than %d objects in all: split the input", maxObjects)}
		}
	}
	return objs, nil
}

// doc is one document's JSON with its number and first line.
type doc struct {
	json    []byte
	index   int
	line    int
	raw     []byte
	rawLine int
}

// split cuts data into documents as JSON.
func split(data []byte) ([]doc, error) {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	if trimmed := bytes.TrimLeft(data, " \t\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return splitJSON(data)
	}
	return splitYAML(data)
}

// splitJSON reads a stream of JSON values.
func splitJSON(data []byte) ([]doc, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []doc
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: invalid JSON: %w", n, err)
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		line := 1 + bytes.Count(data[:start], []byte("\n"))
		docs = append(docs, doc{json: raw, index: n, line: line, raw: raw, rawLine: line})
	}
}

// splitYAML reads YAML documents with apimachinery's reader, as kubectl
// does, and finds each document's line in data.
func splitYAML(data []byte) ([]doc, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []doc
	cursor := 0
	for n := 1; ; n++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		line, rawLine := 0, 0
		if i := bytes.Index(data[cursor:], bytes.TrimSuffix(raw, []byte("\n"))); i >= 0 {
			at := cursor + i
			cursor = at + len(raw) - 1
			rawLine = 1 + bytes.Count(data[:at], []byte("\n"))
			line = rawLine + leadingLines(raw)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: invalid YAML: %s", n, oneLine(err))
		}
		if t := bytes.TrimSpace(js); bytes.Equal(t, []byte("null")) {
			continue // blank, only comments, or null
		}
		docs = append(docs, doc{json: js, index: n, line: line, raw: raw, rawLine: rawLine})
	}
}

// leadingLines counts the blank, comment and "---" lines that open a
// document (the reader keeps a separator that opens the stream).
func leadingLines(raw []byte) int {
	n := 0
	for _, l := range strings.SplitAfter(string(raw), "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(t, "---") {
			return n
		}
		n++
	}
	return 0
}

// head is what decode reads of every object.
type head struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// decode reads one document: an object, or a List of objects.
func decode(d doc) ([]Object, error) {
	h, err := readHead(d.json)
	if err != nil {
		return nil, err
	}
	if !isList(h) {
		return []Object{object(h, d.json, -1)}, nil
	}
	objs := make([]Object, 0, len(h.Items))
	for i, item := range h.Items {
		ih, err := readHead(item)
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		objs = append(objs, object(ih, item, i))
	}
	return objs, nil
}

func readHead(js []byte) (head, error) {
	var h head
	if t := bytes.TrimSpace(js); len(t) == 0 || t[0] != '{' {
		return h, errors.New("not an object: a Kubernetes manifest is a mapping with apiVersion and kind")
	}
	if err := json.Unmarshal(js, &h); err != nil {
		return h, fmt.Errorf("not a Kubernetes object: %s", oneLine(err))
	}
	if h.Kind == "" {
		return h, errors.New("kind: Required value")
	}
	if h.APIVersion == "" {
		return h, errors.New("apiVersion: Required value")
	}
	return h, nil
}

// isList reports a List as kubectl expands it: kind List, or a kind
// ending in List, with an items array.
func isList(h head) bool {
	return strings.HasSuffix(h.Kind, "List") && h.Items != nil
}

func object(h head, js []byte, item int) Object {
	return Object{Item: item, APIVersion: h.APIVersion, Kind: h.Kind,
		Namespace: h.Metadata.Namespace, Name: h.Metadata.Name, JSON: js}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
