package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

const (
	root       = "../.."
	compatPath = "docs/compatibility.md"
	testedHead = "## Tested in CI"
	longHead   = "## Tested by .ci/long"
	kindsHead  = "## Config kinds and their stability"
)

// pin is one row the "Tested in CI" table (or, with head, another
// table) must have: the row whose first cell starts with component, whose
// Pin cell names file, and whose Version cell is what version reads from
// that file.
type pin struct {
	component string
	file      string
	// head is the heading of the pin's table: testedHead (the default,
	// .ci/run) or longHead (.ci/long).
	head    string
	version func(t *testing.T, text string) string
	// match compares the row's Version cell with the pinned version;
	// nil means equal.
	match func(cell, pinned string) bool
}

// goModRequire reads a module's version from a go.mod require line.
func goModRequire(module string) func(*testing.T, string) string {
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(v\S+)`)
	return func(t *testing.T, text string) string { return submatch(t, re, text, module) }
}

// shellVar reads NAME=VALUE from a shell script.
func shellVar(name string) func(*testing.T, string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `=(\S+)$`)
	return func(t *testing.T, text string) string { return submatch(t, re, text, name) }
}

// lineValue reads "KEY VALUE" or "KEY: VALUE" from the start of a line.
func lineValue(key string) func(*testing.T, string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s+(\S+)$`)
	return func(t *testing.T, text string) string { return submatch(t, re, text, key) }
}

// goStrings reads Go string constants NAME = "value" and joins their
// values with ", ".
func goStrings(names ...string) func(*testing.T, string) string {
	return func(t *testing.T, text string) string {
		var vals []string
		for _, n := range names {
			re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(n) + `\s*=\s*"([^"]+)"`)
			vals = append(vals, submatch(t, re, text, n))
		}
		return strings.Join(vals, ", ")
	}
}

// aptPackage checks that setup.sh's packages list installs pkg and returns
// its name: the pin is the package, its version the CI machine's release.
func aptPackage(pkg string) func(*testing.T, string) string {
	re := regexp.MustCompile(`(?m)^packages=\(([^)]*)\)`)
	return func(t *testing.T, text string) string {
		list := strings.Fields(submatch(t, re, text, "packages"))
		if !slices.Contains(list, pkg) {
			t.Errorf("setup.sh's packages %v no longer install %q", list, pkg)
		}
		return pkg
	}
}

func submatch(t *testing.T, re *regexp.Regexp, text, what string) string {
	t.Helper()
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Errorf("pin %q not found (%s)", what, re)
		return ""
	}
	return m[1]
}

// mentions is a match for a package pin: the cell names the package in
// backticks.
func mentions(cell, pinned string) bool { return strings.Contains(cell, "`"+pinned+"`") }

// pins is every version CI builds or installs. A new pin file belongs
// here and in docs/compatibility.md.
var pins = []pin{
	{component: "Kubernetes", file: "test/testbin/go.mod", version: goModRequire("k8s.io/kubernetes")},
	{component: "Kubernetes, oldest tested", file: "test/testbin/release-1.34/go.mod", version: goModRequire("k8s.io/kubernetes"), head: longHead},
	{component: "Kubernetes 1.36", file: "test/testbin/release-1.36/go.mod", version: goModRequire("k8s.io/kubernetes"), head: longHead},
	{component: "Kubernetes 1.35", file: "test/testbin/release-1.35/go.mod", version: goModRequire("k8s.io/kubernetes"), head: longHead},
	{component: "etcd", file: "test/testbin/go.mod", version: goModRequire("go.etcd.io/etcd/server/v3")},
	{component: "CoreDNS", file: "test/testbin/build.sh", version: shellVar("coredns_version")},
	{component: "containerd 2.x", file: "test/e2e/containerd2.sh", version: shellVar("version")},
	{component: "containerd 1.6", file: "test/e2e/setup.sh", version: aptPackage("containerd"),
		match: func(cell, pinned string) bool { return strings.HasPrefix(cell, "1.6 ") && mentions(cell, pinned) }},
	{component: "critest", file: "test/e2e/critest.sh", version: shellVar("version")},
	{component: "kube-proxy mode", file: "test/cluster/cluster.go", version: goStrings("ProxyIPTables")},
	{component: "kube-proxy nftables mode", file: "test/cluster/cluster.go", version: goStrings("ProxyNFTables"), head: longHead},
	{component: "CNI plugins", file: "test/e2e/setup.sh", version: aptPackage("containernetworking-plugins"), match: mentions},
	{component: "Helm", file: "test/testbin/helm.sh", version: shellVar("version")},
	{component: "kustomize", file: "test/testbin/kustomize.sh", version: shellVar("version")},
	{component: "Go", file: "go.mod", version: lineValue("go")},
}

// row is one line of a markdown table, cells trimmed.
type row []string

// table returns the data rows of the first table after the heading line
// head, before the next "## " heading.
func table(t *testing.T, doc, head string) []row {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n"+head+"\n")
	if !ok {
		t.Fatalf("%s: no heading %q", compatPath, head)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	var rows []row
	sc := bufio.NewScanner(strings.NewReader(section))
	header := true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 || !header {
				break // the table ended
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header:
			header = false // the header row
		case strings.Trim(cells[0], "-: ") == "":
			// the delimiter row
		default:
			rows = append(rows, cells)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table rows under %q", compatPath, head)
	}
	return rows
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("read pin: %v", err)
	}
	return string(b)
}

// headOf is the heading of p's table.
func (p pin) headOf() string {
	if p.head == "" {
		return testedHead
	}
	return p.head
}

// runner is the script that runs what p's table says is tested.
func (p pin) runner() string {
	if p.headOf() == longHead {
		return ".ci/long"
	}
	return ".ci/run"
}

// TestTestedRowsMatchPins checks each row of the "Tested in CI" and
// "Tested by .ci/long" tables against its pin, and that no row stands
// without one.
func TestTestedRowsMatchPins(t *testing.T) {
	doc := read(t, compatPath)
	for _, head := range []string{testedHead, longHead} {
		rows := table(t, doc, head)
		used := make([]bool, len(rows))
		for _, p := range pins {
			if p.headOf() != head {
				continue
			}
			t.Run(p.component, func(t *testing.T) {
				want := p.version(t, read(t, p.file))
				i := slices.IndexFunc(rows, func(r row) bool { return strings.HasPrefix(r[0], p.component) })
				if i < 0 {
					t.Fatalf("%s: no %q row under %q (pinned %s in %s)", compatPath, p.component, head, want, p.file)
				}
				used[i] = true
				r := rows[i]
				if len(r) < 3 {
					t.Fatalf("%s: row %q has %d cells, want Component | Version | Pin | ...", compatPath, r[0], len(r))
				}
				version, pinCell := strings.Trim(r[1], "`"), r[2]
				match := p.match
				if match == nil {
					match = func(cell, pinned string) bool { return cell == pinned }
				}
				if !match(version, want) {
					t.Errorf("%s: %s is %q, but %s pins %q", compatPath, p.component, r[1], p.file, want)
				}
				if !strings.Contains(pinCell, "`"+p.file+"`") {
					t.Errorf("%s: %s's Pin cell %q does not name `%s`", compatPath, p.component, pinCell, p.file)
				}
			})
		}
		for i, r := range rows {
			if !used[i] {
				t.Errorf("%s: row %q under %q has no pin in this test to back it", compatPath, r[0], head)
			}
		}
	}
}

// TestPinScriptsRunInCI checks that .ci/run (or .ci/long, for its table)
// calls every script a tested row names, and names every release module
// (test/testbin/release-*): a version the runner does not build is not
// tested by it.
func TestPinScriptsRunInCI(t *testing.T) {
	for _, p := range pins {
		runner := read(t, p.runner())
		switch {
		case strings.HasSuffix(p.file, ".sh"):
			if !strings.Contains(runner, p.file) {
				t.Errorf("%s does not call %s, yet %s names it as %s's pin", p.runner(), p.file, compatPath, p.component)
			}
		case strings.HasPrefix(p.file, "test/testbin/release-"):
			dir := filepath.Base(filepath.Dir(p.file))
			if !strings.Contains(runner, "-m "+dir) {
				t.Errorf("%s does not build %s, yet %s names it as %s's pin", p.runner(), dir, compatPath, p.component)
			}
		}
	}
}

// TestDebianContainerdMinor compares the 1.6 row with the Debian-packaged
// containerd on this machine, when there is one (the CI machine has it).
func TestDebianContainerdMinor(t *testing.T) {
	path, err := exec.LookPath("containerd")
	if err != nil {
		t.Skip("no containerd on $PATH")
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		t.Fatalf("containerd --version: %v", err)
	}
	// "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
	f := strings.Fields(string(out))
	if len(f) < 3 || !strings.Contains(f[2], "~ds") {
		t.Skipf("containerd %q is not Debian's package", strings.TrimSpace(string(out)))
	}
	minor := strings.Join(strings.SplitN(f[2], ".", 3)[:2], ".")
	rows := table(t, read(t, compatPath), testedHead)
	want := "containerd " + minor
	if !slices.ContainsFunc(rows, func(r row) bool { return strings.HasPrefix(r[0], want) && strings.HasPrefix(r[1], minor+" ") }) {
		t.Errorf("%s: setup.sh installs Debian's containerd %s here, but no %q row gives version %s", compatPath, f[2], want, minor)
	}
}

// TestMinimumKubernetes checks that the reasons the page gives for 1.30 are
// still in deploy/: the preStop sleep action and matchConditions.
func TestMinimumKubernetes(t *testing.T) {
	doc := read(t, compatPath)
	if !strings.Contains(doc, "## Minimum Kubernetes version: 1.30") {
		t.Fatalf("%s: no minimum Kubernetes 1.30 section", compatPath)
	}
	var sleep, conditions []string
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if regexp.MustCompile(`(?m)^\s*preStop:\s*\n\s*sleep:`).Match(b) {
			sleep = append(sleep, rel)
		}
		if regexp.MustCompile(`(?m)^\s*matchConditions:`).Match(b) {
			conditions = append(conditions, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk deploy: %v", err)
	}
	for _, f := range []string{"deploy/dnsserver/deployment.yaml", "deploy/webhook/deployment.yaml"} {
		if !slices.Contains(sleep, f) {
			t.Errorf("%s no longer has a preStop sleep action: revisit the 1.30 minimum in %s", f, compatPath)
		}
	}
	if f := "deploy/webhook/validatingwebhookconfiguration.yaml"; !slices.Contains(conditions, f) {
		t.Errorf("%s no longer has matchConditions: revisit the 1.30 minimum in %s", f, compatPath)
	}
	for _, f := range append(sleep, conditions...) {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("%s needs Kubernetes 1.30 but %s does not name it", f, compatPath)
		}
	}
}

// TestCouplings checks the coupling constants the skew section names.
func TestCouplings(t *testing.T) {
	doc := read(t, compatPath)
	if autopath.DefaultOptionCode != v1alpha1.DefaultOptionCode {
		t.Errorf("autopath.DefaultOptionCode %d != v1alpha1.DefaultOptionCode %d", autopath.DefaultOptionCode, v1alpha1.DefaultOptionCode)
	}
	for _, want := range []string{
		fmt.Sprintf("The option code is **%d**", autopath.DefaultOptionCode),
		fmt.Sprintf("use code %d (`forward.DefaultLoopOptionCode`)", forward.DefaultLoopOptionCode),
		"`GET " + nodesettings.Path + "`",
		"within " + durationText(v1alpha1.AutopathDeadline) + " (`v1alpha1.AutopathDeadline`)",
		"waits " + string(v1alpha1.DefaultNodeLocalClusterTimeout) + " for the cluster DNS (`nodeLocal.clusterTimeout`)",
		"`apiVersion: " + v1alpha1.GroupVersion + "`",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("%s does not say %q", compatPath, want)
		}
	}
}

func durationText(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s" }

// TestConfigKinds checks the kinds table against every *Kind constant in
// api/v1alpha1, so a new kind cannot ship undocumented.
func TestConfigKinds(t *testing.T) {
	re := regexp.MustCompile(`(?m)^const \w+Kind = "(\w+)"`)
	files, err := filepath.Glob(filepath.Join(root, "api/v1alpha1/*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			kinds = append(kinds, string(m[1]))
		}
	}
	var documented []string
	for _, r := range table(t, read(t, compatPath), kindsHead) {
		documented = append(documented, strings.Trim(r[0], "`"))
	}
	slices.Sort(kinds)
	slices.Sort(documented)
	if !slices.Equal(kinds, documented) {
		t.Errorf("%s lists kinds %v, api/v1alpha1 declares %v", compatPath, documented, kinds)
	}
	for _, k := range []string{v1alpha1.ShimKind, v1alpha1.WebhookKind, v1alpha1.ServerKind, v1alpha1.NRIKind} {
		if !slices.Contains(kinds, k) {
			t.Errorf("the *Kind regexp missed %s", k)
		}
	}
}
