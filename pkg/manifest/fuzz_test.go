package manifest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParse: any input parses or fails with a *Error; every object is
// JSON with a kind or has a problem instead, lies within the input's lines, and its fields are
// located within them too.
func FuzzParse(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod}]\n"))
	f.Add([]byte("{\"apiVersion\": \"v1\", \"kind\": \"Pod\"}\n{\"apiVersion\": \"v1\", \"kind\": \"Service\"}"))
	f.Add([]byte("---\n# c\r\napiVersion: v1\r\nkind: Pod\r\nspec: {dnsConfig: {searches: [a]}}\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Parse("f", data, 100)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, o := range objs {
			if o.Err != nil {
				if o.JSON != nil {
					t.Fatalf("object %+v: a problem and JSON", o)
				}
			} else if o.Kind == "" || !json.Valid(o.JSON) {
				t.Fatalf("object %+v: no kind or not JSON", o)
			}
			if o.Line < 0 || o.Line > lines {
				t.Fatalf("object line %d outside 1..%d", o.Line, lines)
			}
			for _, field := range []string{"spec.dnsConfig.searches[0]", "items[0].spec", "metadata.annotations[a.b/c]", "x"} {
				if l := o.Locator().FieldLine(o.Prefix() + "." + field); l < 0 || l > lines {
					t.Fatalf("field %s at line %d outside 1..%d", field, l, lines)
				}
			}
		}
	})
}
