package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/dnsconfigurer/dnsconfigurer/"

// core lists each pure package, the module packages it may import
// (directly or not), and the pure data-structure libraries it may import
// (libs, with what they import); anything else outside the standard
// library fails.
var core = []struct {
	pkg     string
	allowed []string
	libs    []string
}{
	{"internal/safefile", nil, nil},
	{"pkg/resolvconf", []string{"internal/safefile"}, nil},
	{"pkg/fqdn", nil, nil},
	{"pkg/policy", []string{"pkg/fqdn", "pkg/resolvconf", "internal/safefile"}, nil},
	{"pkg/autopath", []string{"pkg/policy", "pkg/fqdn", "pkg/resolvconf", "internal/safefile"}, nil},
	// The sorted set of PTR addresses kept per change (a persistent
	// sorted map, no I/O, no logger).
	{"pkg/dnsserver/store", nil, []string{"github.com/benbjohnson/immutable", "golang.org/x/exp/constraints"}},
	{"api/v1alpha1", nil, nil},
}

func TestPureCore(t *testing.T) {
	for _, c := range core {
		t.Run(c.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+c.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", c.pkg, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				rel, ours := strings.CutPrefix(dep, module)
				if ours && (rel == c.pkg || slices.Contains(c.allowed, rel)) || slices.Contains(c.libs, dep) {
					continue
				}
				t.Errorf("%s imports %s; the pure core imports only the standard library and %v", c.pkg, dep, c.allowed)
			}
		})
	}
}

// TestTestkitOnlyInTests keeps the test kit (a fake upstream, listeners)
// out of the binary: only tests and test/ helpers may import it.
func TestTestkitOnlyInTests(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"cmd/dnsconfigurer").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if slices.Contains(strings.Fields(string(out)), module+"internal/testkit") {
		t.Error("cmd/dnsconfigurer imports internal/testkit; only tests may")
	}
}
