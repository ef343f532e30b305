package manifest

import (
	"context"
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
		{"scalar", "hello\n", "f.yaml: document 1: not an object"},
		{"no kind", "apiVersion: v1\n", "f.yaml: document 1: kind: Required value"},
		{"no apiVersion", "kind: Pod\n", "f.yaml: document 1: apiVersion: Required value"},
		{"bad List item", "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod}, 3]\n", "f.yaml: document 1: items[1]: not an object"},
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
	lim := Limits{MaxFileSize: 100, MaxTotalSize: 1000, MaxObjects: 10}
	tests := []struct {
		name    string
		lim     Limits
		sources []string
		want    string
	}{
		{"file size", lim, []string{filepath.Join(dir, "big.yaml")}, "big.yaml: larger than 100 bytes"},
		{"total size", Limits{MaxFileSize: 100, MaxTotalSize: 100, MaxObjects: 10},
			[]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml")}, "input is larger than 100 bytes in all"},
		{"objects across files", Limits{MaxFileSize: 100, MaxTotalSize: 1000, MaxObjects: 3},
			[]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "a.yaml")}, "a.yaml: document 2: more than 3 objects in all"},
		{"missing", lim, []string{filepath.Join(dir, "nope.yaml")}, "nope.yaml: no such file or directory"},
		{"stdin unset", lim, []string{Stdin}, "stdin: no standard input"},
		{"stdin too large", lim, []string{Stdin}, "stdin: larger than 100 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Reader{Limits: tc.lim}
			if tc.name == "stdin too large" {
				r.Stdin = strings.NewReader(strings.Repeat("#", 101))
			}
			_, _, err := r.Read(context.Background(), tc.sources)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
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
