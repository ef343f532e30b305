package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// where is what a test compares of an object.
type where struct {
	Doc, Line, Item int
	Kind, Name      string
}

func wheres(objs []Object) []where {
	var out []where
	for _, o := range objs {
		out = append(out, where{o.Document, o.Line, o.Item, o.Kind, o.Name})
	}
	return out
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []where
	}{
		{"one", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n", []where{{1, 1, -1, "Pod", "a"}}},
		{"leading separator and comment", "---\n# c\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
			[]where{{1, 3, -1, "Pod", "a"}}},
		{"empty documents dropped, numbers kept", "---\n---\n# only a comment\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n---\nnull\n",
			[]where{{3, 5, -1, "Pod", "b"}}},
		{"CRLF", "apiVersion: v1\r\nkind: Pod\r\nmetadata: {name: a}\r\n---\r\napiVersion: v1\r\nkind: Service\r\nmetadata: {name: s}\r\n",
			[]where{{1, 1, -1, "Pod", "a"}, {2, 5, -1, "Service", "s"}}},
		{"no final newline", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}",
			[]where{{1, 1, -1, "Pod", "a"}, {2, 5, -1, "Pod", "b"}}},
		{"same text twice", "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\n",
			[]where{{1, 1, -1, "Pod", ""}, {2, 4, -1, "Pod", ""}}},
		{"List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n",
			[]where{{1, 4, 0, "Pod", "a"}, {1, 5, 1, "Service", "s"}}},
		{"typed List", "# c\napiVersion: apps/v1\nkind: DeploymentList\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: d}\n",
			[]where{{1, 5, 0, "Deployment", "d"}}},
		{"empty List", "apiVersion: v1\nkind: List\nitems: []\n", nil},
		{"JSON stream", "{\"apiVersion\": \"v1\", \"kind\": \"Pod\"}\n\n{\"apiVersion\": \"v1\",\n \"kind\": \"Service\"}\n",
			[]where{{1, 1, -1, "Pod", ""}, {2, 3, -1, "Service", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parse("f.yaml", []byte(tc.in), 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := wheres(objs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"bad YAML in document 2", "apiVersion: v1\nkind: Pod\n---\nkind: [\n", "f.yaml: document 2: invalid YAML: "},
		{"bad separator", "apiVersion: v1\nkind: Pod\n--- x\n", "f.yaml: document 1: invalid Yaml document separator"},
		{"bad JSON", "{\"kind\": \"Pod\"}\n{\"kind\": ", "f.yaml: document 2: invalid JSON"},
		{"too many objects", strings.Repeat("apiVersion: v1\nkind: Pod\n---\n", 4), "f.yaml: document 4: more than 3 objects in all"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.in), 3)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			var me *Error
			if !errors.As(err, &me) {
				t.Errorf("error %T is not a *manifest.Error", err)
			}
		})
	}
}

// TestParseObjectErrors: a document that parses but is no usable object
// is an object with a problem at its line, not a failed read.
func TestParseObjectErrors(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		want     FieldError
	}{
		{"scalar", "hello\n", 1, FieldError{Message: "not an object: a Kubernetes manifest is a mapping with apiVersion and kind"}},
		{"no kind", "# c\napiVersion: v1\n", 2, FieldError{Field: "kind", Message: "Required value"}},
		{"no apiVersion", "kind: Pod\n", 1, FieldError{Field: "apiVersion", Message: "Required value"}},
		{"bad List item", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod}\n- 3\n", 5,
			FieldError{Message: "not an object: a Kubernetes manifest is a mapping with apiVersion and kind"}},
		{"name of the wrong type", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: 12\n", 1,
			FieldError{Field: "metadata.name", Message: "Invalid value: 12: must be a string, not a number: the API server refuses the object (quote it: \"12\"; helm --set-string keeps it a string)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := lastParsed(t, "f.yaml", tc.in, 3)
			if o.Err == nil || *o.Err != tc.want || o.JSON != nil || o.Line != tc.line {
				t.Fatalf("got line %d, JSON %q, problem %+v; want line %d, no JSON, %+v", o.Line, o.JSON, o.Err, tc.line, tc.want)
			}
		})
	}
}

// TestTypeError: encoding/json's field path gets its list indexes back,
// at the first value of the kind it names.
func TestTypeError(t *testing.T) {
	js := []byte(`{"spec": {"template": {"spec": {"dnsConfig": {"options": [{"name": "a"}, {"name": "ndots", "value": 2}], "searches": [["x"]]}, "hostNetwork": "yes"}}}}`)
	tests := []struct {
		name string
		into any
		want string
	}{
		{"number for a string", &struct {
			Spec struct {
				Template struct {
					Spec struct {
						DNSConfig struct {
							Options []struct {
								Name  string  `json:"name"`
								Value *string `json:"value"`
							} `json:"options"`
						} `json:"dnsConfig"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}{}, "spec.template.spec.dnsConfig.options[1].value: Invalid value: 2: must be a string, not a number"},
		{"list for a string, found from a suffix", &struct {
			Spec struct {
				DNSConfig struct {
					Searches []string `json:"searches"`
				} `json:"dnsConfig"`
			} `json:"spec"`
		}{}, "spec.template.spec.dnsConfig.searches[0]: Invalid value: array: must be a string, not a list"},
		{"string for a bool", &struct {
			Spec struct {
				HostNetwork bool `json:"hostNetwork"`
			} `json:"spec"`
		}{}, "spec.template.spec.hostNetwork: Invalid value: \"yes\": must be true or false, not a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			part := js
			if tc.name != "number for a string" {
				part = []byte(`{"spec": {"dnsConfig": {"searches": [["x"]]}, "hostNetwork": "yes"}}`)
			}
			err := json.Unmarshal(part, tc.into)
			fe, ok := TypeError(js, err)
			if !ok || !strings.HasPrefix(fe.Error(), tc.want) {
				t.Fatalf("TypeError(%v) = %v, %v; want %q...", err, fe, ok, tc.want)
			}
		})
	}
	if _, ok := TypeError(js, errors.New("other")); ok {
		t.Error("TypeError takes an error that is no type error")
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pod(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\n", name)
}

func TestReadDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b.yaml", pod("b"))
	write(t, dir, "a.json", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}`)
	write(t, dir, "c.yml", pod("c"))
	write(t, dir, "notes.txt", "not a manifest")
	write(t, dir, "sub/d.yaml", pod("d"))
	for _, tc := range []struct {
		recursive bool
		want      []string
	}{
		{false, []string{"a", "b", "c"}},
		{true, []string{"a", "b", "c", "d"}},
	} {
		r := Reader{Limits: DefaultLimits, Recursive: tc.recursive}
		objs, files, err := r.Read(context.Background(), []string{dir})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.Name)
		}
		if !reflect.DeepEqual(names, tc.want) || files != len(tc.want) {
			t.Errorf("-R=%v: read %v from %d files, want %v", tc.recursive, names, files, tc.want)
		}
	}
}

func TestReadLimits(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", pod("a")+"---\n"+pod("b"))
	write(t, dir, "big.yaml", pod("big")+"# "+strings.Repeat("x", 200)+"\n")
	write(t, dir, "empty.yaml", "# nothing\n---\n\n")
	write(t, dir, "empty/a.yaml", "")
	lim := Limits{MaxObjectSize: 100, MaxDocumentSize: 150, MaxKeptSize: 1000, MaxObjects: 10}
	tests := []struct {
		name    string
		lim     Limits
		sources []string
		stdin   string
		want    string
	}{
		{"document size", lim, []string{filepath.Join(dir, "big.yaml")}, "", "big.yaml: document 1: larger than 150 bytes"},
		{"kept size", Limits{MaxObjectSize: 100, MaxDocumentSize: 100, MaxKeptSize: 100, MaxObjects: 10},
			[]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml")}, "", "the objects to check hold more than 100 bytes in all"},
		{"objects across files", Limits{MaxObjectSize: 100, MaxDocumentSize: 150, MaxKeptSize: 1 << 20, MaxObjects: 10},
			[]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml")}, "", "a.yaml: document 1: more than 10 objects in all"},
		{"missing", lim, []string{filepath.Join(dir, "nope.yaml")}, "", "nope.yaml: no such file or directory"},
		{"stdin unset", lim, []string{Stdin}, "", "stdin: no standard input"},
		{"stdin too large", lim, []string{Stdin}, strings.Repeat("#", 300), "stdin: document 1: larger than 150 bytes"},
		{"one line too long", lim, []string{Stdin}, "apiVersion: v1\nkind: ConfigMap\ndata: {a: " + strings.Repeat("x", 1<<20), "stdin: document 1: larger than 150 bytes"},
		{"stdin empty", lim, []string{Stdin}, "", "stdin: no objects: the input is empty"},
		{"stdin only comments", lim, []string{Stdin}, "# helm: nothing\n---\n\n", "stdin: no objects"},
		{"file empty", lim, []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "empty.yaml")}, "", "empty.yaml: no objects"},
		{"directory empty", lim, []string{filepath.Join(dir, "empty")}, "", "empty: no objects"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Reader{Limits: tc.lim}
			if tc.name != "stdin unset" {
				r.Stdin = strings.NewReader(tc.stdin)
			}
			_, _, err := r.Read(context.Background(), tc.sources)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestReadPerObject: the size limit is each object's. A stream of many
// objects passes it; an object over it is a problem of its own, and the
// next object is read as usual.
func TestReadPerObject(t *testing.T) {
	var in strings.Builder
	for i := range 50 {
		in.WriteString(pod(fmt.Sprintf("p%d", i)) + "---\n")
	}
	in.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {a: " + strings.Repeat("x", 300) + "}\n---\n" + pod("last"))
	r := Reader{Limits: Limits{MaxObjectSize: 100, MaxDocumentSize: 1000, MaxKeptSize: 1 << 20, MaxObjects: 100}, Stdin: strings.NewReader(in.String())}
	objs, _, err := r.Read(context.Background(), []string{Stdin})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 52 {
		t.Fatalf("read %d objects, want 52", len(objs))
	}
	big, last := objs[50], objs[51]
	if big.Err == nil || !strings.HasPrefix(big.Err.Message, "Request entity too large") || big.JSON != nil || big.Line != 201 || big.Name != "big" {
		t.Errorf("big object: %+v at line %d", big.Err, big.Line)
	}
	if last.Err != nil || last.Name != "last" || last.Line != 206 {
		t.Errorf("last object: %+v %s at line %d, want last at line 206", last.Err, last.Name, last.Line)
	}
}

func TestReadKeep(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", pod("a")+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n")
	r := Reader{Limits: DefaultLimits, Keep: func(kind string) bool { return kind == "Pod" }}
	objs, _, err := r.Read(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].JSON == nil || objs[1].JSON != nil || objs[1].Kind != "ConfigMap" || objs[1].Name != "c" {
		t.Errorf("got %+v; want the Pod with its JSON, the ConfigMap named without it", objs)
	}
}

// lastParsed is the last object Parse reads from in.
func lastParsed(t *testing.T, source, in string, maxObjects int) Object {
	t.Helper()
	objs, err := Parse(source, []byte(in), maxObjects)
	if err != nil {
		t.Fatal(err)
	}
	return objs[len(objs)-1]
}
