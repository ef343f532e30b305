package main

import (
	"os"
	"strings"
	"testing"
)

// TestReferenceDoc keeps docs/reference.md true: every subcommand's -h text
// must appear in it verbatim.
func TestReferenceDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range commands {
		_, out, errOut := run(t, "", name, "-h")
		help := strings.TrimSpace(out + errOut)
		if !strings.Contains(string(doc), help) {
			t.Errorf("docs/reference.md is stale for %q; regenerate it (see its header). Current help:\n%s", name, help)
		}
	}
}
