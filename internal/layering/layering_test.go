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
	// Every unsafe line of the product (TestUnsafeInOnePackage).
	{"internal/unsafeptr", nil, nil},
	{"pkg/resolvconf", []string{"internal/safefile"}, nil},
	{"pkg/fqdn", nil, nil},
	{"pkg/policy", []string{"api/v1alpha1", "pkg/fqdn", "pkg/resolvconf", "internal/safefile"}, nil},
	{"pkg/autopath", []string{"api/v1alpha1", "pkg/policy", "pkg/fqdn", "pkg/resolvconf", "internal/safefile"}, nil},
	// The sorted set of PTR addresses kept per change (a persistent
	// sorted map, no I/O, no logger).
	{"pkg/store", []string{"api/v1alpha1", "pkg/store/internal/pack", "internal/unsafeptr"}, []string{"github.com/benbjohnson/immutable", "golang.org/x/exp/constraints"}},
	// The store's packed layout, over internal/unsafeptr's views.
	{"pkg/store/internal/pack", []string{"internal/unsafeptr"}, nil},
	// Template answers (CoreDNS's template plugin): compiled once from
	// api/v1alpha1, records built with miekg/dns and text/template.
	{"pkg/template", []string{"api/v1alpha1"}, []string{"github.com/miekg/dns", "golang.org/x/net/bpf", "golang.org/x/net/internal/iana",
		"golang.org/x/net/internal/socket", "golang.org/x/net/ipv4", "golang.org/x/net/ipv6", "golang.org/x/sys/unix"}},
	// The reply cache and its packed replies' rotation: bytes keyed by
	// question and byte offsets, no DNS library.
	{"pkg/clusterdns/replycache", nil, nil},
	// A client's topology and CoreDNS's zone-scoped names: miekg/dns (with
	// what it imports) for the EDNS0 option, no client-go, no logger.
	{"pkg/topology", []string{"pkg/dnsmsg"}, []string{"github.com/miekg/dns", "golang.org/x/net/bpf", "golang.org/x/net/internal/iana",
		"golang.org/x/net/internal/socket", "golang.org/x/net/ipv4", "golang.org/x/net/ipv6", "golang.org/x/sys/unix"}},
	// Start-up memory release: madvise on the executable's mappings.
	{"internal/memrelease", nil, nil},
	{"api/v1alpha1", nil, nil},
	// The Corefile converter: CoreDNS's own parser, and YAML for a
	// ConfigMap; it reads only the files an import names.
	{"pkg/corefile", []string{"api/v1alpha1"}, []string{"github.com/coredns/caddy/caddyfile", "sigs.k8s.io/yaml", "go.yaml.in/yaml/v2"}},
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

// apart lists packages that must not depend on another, directly or not
// (a module package or any package under an external path). Siblings share
// a third package instead of importing each other.
var apart = []struct {
	pkg, not, why string
}{
	{"pkg/nriplugin", module + "pkg/cri", "the NRI plugin and the shim share pkg/podfacts"},
	{"pkg/cri", module + "pkg/nriplugin", "the NRI plugin and the shim share pkg/podfacts"},
	{"pkg/nriplugin", "k8s.io/cri-api", "the NRI plugin fills a podfacts.Sandbox, not a CRI config"},
	{"pkg/podfacts", module + "pkg/cri", "pkg/podfacts serves both agents"},
	{"pkg/podfacts", module + "pkg/nriplugin", "pkg/podfacts serves both agents"},
	{"pkg/podfacts", "k8s.io/cri-api", "pkg/podfacts has a Sandbox of its own"},
	{"pkg/podfacts", "github.com/containerd/nri", "pkg/podfacts has a Sandbox of its own"},
	{"pkg/hostresolv", module + "pkg/policy", "podfacts.HostOf is the engine's view of a snapshot"},
	{"pkg/explain", module + "pkg/cri", "explain reads an agent through pkg/nodesettings"},
	{"pkg/explain", module + "pkg/nriplugin", "explain reads an agent through pkg/nodesettings"},
	{"pkg/kubefeed", "github.com/miekg/dns", "the feed converts objects; the DNS server answers"},
	{"pkg/store", "k8s.io", "the store takes slim records; pkg/kubefeed converts API objects"},
}

func TestApart(t *testing.T) {
	for _, a := range apart {
		t.Run(a.pkg+" without "+strings.TrimPrefix(a.not, module), func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+a.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", a.pkg, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				if dep == a.not || strings.HasPrefix(dep, a.not+"/") {
					t.Errorf("%s imports %s (%s)", a.pkg, dep, a.why)
				}
			}
		})
	}
}

// TestUnsafeInOnePackage keeps every unsafe line of the product in
// internal/unsafeptr, where each is one documented pattern. Tests may
// import unsafe.
func TestUnsafeInOnePackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"../../pkg/...", "../../internal/...", "../../cmd/...", "../../api/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && slices.Contains(f[1:], "unsafe") && f[0] != module+"internal/unsafeptr" {
			t.Errorf("%s imports unsafe; only internal/unsafeptr may", f[0])
		}
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
