package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deployCommand finds `kubectl apply|delete -k DIR` in a document.
var deployCommand = regexp.MustCompile("kubectl (?:apply|delete) -k (deploy/[A-Za-z0-9_./-]+[A-Za-z0-9_-])")

// deployPath finds a deploy/ kustomization named in backquotes without the
// deploy/ prefix, as deploy/README.md writes them.
var deployPath = regexp.MustCompile("`((?:components|overlays|examples)/[A-Za-z0-9_-]+)`")

// myDNS is the operator's own copy the migration steps work in.
const myDNS = "deploy/overlays/my-dns"

// TestDeployREADMEPaths: every kustomization deploy/README.md applies,
// deletes or names (its migration steps and rollbacks included) exists,
// so that no documented command fails on a path.
func TestDeployREADMEPaths(t *testing.T) {
	doc := read(t, "deploy/README.md")
	n := 0
	check := func(dir string) {
		t.Helper()
		if dir == myDNS {
			return
		}
		n++
		if _, err := os.Stat(filepath.Join(root, dir, "kustomization.yaml")); err != nil {
			t.Errorf("deploy/README.md names %s: no kustomization there (%v)", dir, err)
		}
	}
	for _, m := range deployCommand.FindAllStringSubmatch(doc, -1) {
		check(m[1])
	}
	for _, m := range deployPath.FindAllStringSubmatch(doc, -1) {
		check(filepath.Join("deploy", m[1]))
	}
	if n < 10 {
		t.Errorf("deploy/README.md: %d kustomizations named, want the entry points, components and rollbacks", n)
	}
	for _, step := range []string{"**1. Convert the Corefile.**", "**2. Deploy side by side.**", "**3. Canary one node.**",
		"**4. Take over node-local everywhere.**", "**5. Replace CoreDNS**", "**6. Finish.**"} {
		if !strings.Contains(doc, step) {
			t.Errorf("deploy/README.md: migration step %q missing", step)
		}
	}
}
