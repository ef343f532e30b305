package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDocuments: the documents of one source as feed reads them. A
// document that is not valid YAML is reported and the next is read; a
// stream that cannot be split ends with an *Error.
func TestDocuments(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // index:line:JSON, or index:!error
		wantErr string
	}{
		{"YAML", "a: 1\n---\n# only a comment\n---\nb: 2\n", []string{`1:1:{"a":1}`, `3:5:{"b":2}`}, ""},
		{"bad document in the middle", "a: 1\n---\nb: [\n---\nc: 3\n", []string{`1:1:{"a":1}`, "2:!error", `3:5:{"c":3}`}, ""},
		{"JSON stream", "{\"a\":1}\n{\"b\":2}\n", []string{`1:1:{"a":1}`, `2:2:{"b":2}`}, ""},
		{"broken JSON", "{\"a\":1}\n{\"b\":", []string{`1:1:{"a":1}`}, "document 2: invalid JSON: unexpected EOF"},
		{"document too large", "a: " + strings.Repeat("x", 200<<10) + "\n", nil, "document 1: larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := Documents(strings.NewReader(tt.in), 1024, func(d Document) {
				if d.Err != nil {
					got = append(got, fmt.Sprintf("%d:!error", d.Index))
					return
				}
				got = append(got, fmt.Sprintf("%d:%d:%s", d.Index, d.Line, d.JSON))
			})
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("documents = %q, want %q", got, tt.want)
			}
			var e *Error
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantErr != "" && (!errors.As(err, &e) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want an *Error containing %q", err, tt.wantErr)
			}
		})
	}
}
