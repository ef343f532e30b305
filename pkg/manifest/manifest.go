package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Limits bound what one read holds in memory.
type Limits struct {
	// MaxObjectSize caps one object, in bytes of JSON: a document, or
	// one item of a List. The API server refuses a larger request body,
	// so a larger object is read as a problem of its own (Object.Err).
	MaxObjectSize int64
	// MaxDocumentSize caps one document as read: a List with all its
	// items. Documents are read one at a time, so a stream may be larger.
	MaxDocumentSize int64
	// MaxKeptSize caps the bytes of the objects a read returns with
	// their JSON (Reader.Keep), all sources together.
	MaxKeptSize int64
	// MaxObjects caps the objects of all sources, List items included.
	MaxObjects int
}

// DefaultLimits: an object as large as the API server takes a request
// body (3 MiB), a document of 64 MiB, 64 MiB kept, 10,000 objects.
var DefaultLimits = Limits{MaxObjectSize: 3 << 20, MaxDocumentSize: 64 << 20, MaxKeptSize: 64 << 20, MaxObjects: 10000}

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
	// Err, when set, says why the API server would refuse the object
	// before it looks at its fields: not a mapping, no kind, a field of
	// the wrong type, too large. Such an object has no JSON.
	Err *FieldError

	// raw is the document's text, which starts at file line rawLine (0:
	// not known); Locator reads them.
	raw     []byte
	rawLine int
	// large: over Limits.MaxObjectSize, kept without its text.
	large bool
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

// FieldError is a problem at one field of an object, with the field path
// in the API server's form ("metadata.name", "kind").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Parse splits data, read from source, into its objects: YAML documents
// separated by "---" lines, or a stream of JSON values. Empty documents
// are dropped; Lists (kind List or *List with items) are expanded.
func Parse(source string, data []byte, maxObjects int) ([]Object, error) {
	lim := DefaultLimits
	lim.MaxObjects = maxObjects
	r := Reader{Limits: lim}
	if _, err := r.parse(source, bytes.NewReader(data)); err != nil {
		return nil, err
	}
	return r.objs, nil
}

// doc is one document's JSON with its number and first line.
type doc struct {
	json    []byte
	bad     error // not valid YAML; json is nil
	index   int
	line    int
	raw     []byte
	rawLine int
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

// decode reads one document: an object, or a List of objects. An object
// that cannot be used carries its problem in Err.
func decode(d doc, maxObject int64) []Object {
	h, err := readHead(d.json)
	if err != nil || !isList(h) {
		return []Object{object(h, d.json, -1, err, maxObject)}
	}
	objs := make([]Object, 0, len(h.Items))
	for i, item := range h.Items {
		ih, err := readHead(item)
		objs = append(objs, object(ih, item, i, err, maxObject))
	}
	return objs
}

func readHead(js []byte) (head, *FieldError) {
	var h head
	if t := bytes.TrimSpace(js); len(t) == 0 || t[0] != '{' {
		return h, &FieldError{Message: "not an object: a Kubernetes manifest is a mapping with apiVersion and kind"}
	}
	if err := json.Unmarshal(js, &h); err != nil {
		if fe, ok := TypeError(js, err); ok {
			return h, fe
		}
		return h, &FieldError{Message: "not a Kubernetes object: " + oneLine(err)}
	}
	if h.Kind == "" {
		return h, &FieldError{Field: "kind", Message: "Required value"}
	}
	if h.APIVersion == "" {
		return h, &FieldError{Field: "apiVersion", Message: "Required value"}
	}
	return h, nil
}

// isList reports a List as kubectl expands it: kind List, or a kind
// ending in List, with an items array.
func isList(h head) bool {
	return strings.HasSuffix(h.Kind, "List") && h.Items != nil
}

func object(h head, js []byte, item int, err *FieldError, maxObject int64) Object {
	o := Object{Item: item, APIVersion: h.APIVersion, Kind: h.Kind,
		Namespace: h.Metadata.Namespace, Name: h.Metadata.Name, JSON: js, Err: err}
	if err == nil && int64(len(js)) > maxObject {
		o.Err = &FieldError{Message: fmt.Sprintf("Request entity too large: the object is %d bytes of JSON and the API server takes a request of at most %d", len(js), maxObject)}
		o.large = true
	}
	if o.Err != nil {
		o.JSON = nil
	}
	return o
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
