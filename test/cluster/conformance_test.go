package cluster

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// conformanceFocus selects Kubernetes' own cluster DNS specs.
const conformanceFocus = `\[sig-network\] DNS`

// conformanceSkip leaves out what this cluster cannot or should not run.
// In v1.37.2 that is four DNS specs:
//   - the three "DNS configMap nameserver" specs ([Slow] [Serial]): they
//     edit CoreDNS's ConfigMap in kube-system and expect the server to
//     follow it; dnsconfigurer is configured by flags, not that ConfigMap;
//   - "should provide DNS for the cluster [Provider:GCE]": GCE only.
//
// "should work with a service name that starts with a digit" runs: its
// gate, RelaxedServiceNameValidation, is GA in v1.37 and its label
// ([FeatureGate:...]) is not [Feature:...]. In v1.34.4 (the oldest tested
// release) the gate is alpha and off, and the spec is [Feature:OffByDefault],
// so it is skipped there: five DNS specs.
//
// [Disruptive] is skipped too (no DNS spec carries it today).
const conformanceSkip = `\[Serial\]|\[Disruptive\]|\[Slow\]|\[Feature:|\[Provider:`

// testConformance runs the upstream e2e binary (e2e.test of the same
// release as the cluster) on the DNS specs against this cluster, with
// dnsconfigurer as the cluster DNS, and reports what ran and passed; it
// returns the counts of DNS specs passed, failed and skipped.
func testConformance(t *testing.T, c *Cluster) (npassed, nfailed, nskipped int) {
	report := filepath.Join(c.Dir, "e2e-report")
	if err := os.MkdirAll(report, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 40*time.Minute)
	cmd := c.Command(ctx, filepath.Join(c.BinDir, "e2e.test"),
		"--kubeconfig="+c.Kubeconfig,
		"--provider=local",
		"--num-nodes="+strconv.Itoa(len(c.Nodes)),
		"--dns-domain="+ClusterDomain,
		"--report-dir="+report,
		"--ginkgo.focus="+conformanceFocus,
		"--ginkgo.skip="+conformanceSkip,
		"--ginkgo.no-color",
		"--ginkgo.timeout=35m",
		"--e2e-output-dir="+report,
	)
	cmd.Dir = report
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	if err := os.WriteFile(filepath.Join(c.Dir, "e2e.log"), out, 0o644); err != nil {
		t.Log(err)
	}
	specs, junitErr := readJUnit(report)
	if junitErr != nil {
		t.Logf("e2e output (tail):\n%s", tail(string(out), 80))
		t.Fatalf("e2e.test: %v; report: %v", err, junitErr)
	}
	var passed, failed, skippedDNS []string
	notSelected := 0
	dns := regexp.MustCompile(conformanceFocus)
	for _, s := range specs {
		switch {
		case s.Failure != nil || s.Error != nil:
			failed = append(failed, s.Name)
		case s.Skipped != nil && dns.MatchString(s.Name):
			skippedDNS = append(skippedDNS, s.Name)
		case s.Skipped != nil:
			notSelected++
		default:
			passed = append(passed, s.Name)
		}
	}
	t.Logf("upstream DNS specs in %s: %d passed, %d failed, %d DNS specs skipped by %q (%d other specs not selected)",
		time.Since(begin).Round(time.Second), len(passed), len(failed), len(skippedDNS), conformanceSkip, notSelected)
	for _, n := range passed {
		t.Logf("  passed: %s", n)
	}
	for _, n := range skippedDNS {
		t.Logf("  skipped: %s", n)
	}
	for _, n := range failed {
		t.Errorf("  failed: %s", n)
	}
	if err != nil && len(failed) == 0 {
		t.Errorf("e2e.test: %v\n%s", err, tail(string(out), 80))
	}
	if len(passed) == 0 {
		t.Errorf("no upstream DNS spec ran\n%s", tail(string(out), 80))
	}
	if len(failed) > 0 {
		t.Logf("e2e output (tail):\n%s", tail(string(out), 200))
	}
	return len(passed), len(failed), len(skippedDNS)
}

// junitCase is one spec in e2e.test's JUnit report.
type junitCase struct {
	Name    string    `xml:"name,attr"`
	Skipped *struct{} `xml:"skipped"`
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
}

// readJUnit reads the specs from the report directory's junit_*.xml, but
// the suite's own setup and teardown nodes.
func readJUnit(dir string) ([]junitCase, error) {
	files, err := filepath.Glob(filepath.Join(dir, "junit*.xml"))
	if err != nil || len(files) == 0 {
		return nil, os.ErrNotExist
	}
	var all []junitCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Suites []struct {
				Cases []junitCase `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			return nil, err
		}
		for _, s := range doc.Suites {
			for _, tc := range s.Cases {
				if !strings.HasPrefix(tc.Name, "[It]") {
					continue // the suite's own setup, teardown and report nodes
				}
				all = append(all, tc)
			}
		}
	}
	return all, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
