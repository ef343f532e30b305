package corefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRun: any Corefile either fails with an error or converts to a
// configuration serve accepts, with a finding for every directive.
func FuzzRun(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/Corefile")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(".:53 {\n rewrite name regex (.*)\\.a {1}.b\n cache 10 {\n success 5 1 1\n }\n}\nx.example:5300 {\n forward . 10.0.0.1\n}\n")
	f.Fuzz(func(t *testing.T, text string) {
		if strings.Contains(text, "import") {
			t.Skip("imports read files")
		}
		r, err := Run(Input{Name: "Corefile", Text: []byte(text)}, nil)
		if err != nil {
			return
		}
		if err := check(r.Config); err != nil {
			t.Fatalf("converted without an error but invalid: %v", err)
		}
		for _, fd := range r.Findings {
			if fd.Where == "" || fd.Plugin == "" || fd.Status == "" {
				t.Fatalf("incomplete finding %+v", fd)
			}
		}
	})
}
