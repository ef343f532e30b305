package lintcorpus

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// finding is what the test compares of a finding of validate -o json.
type finding struct {
	Kind, Name, Rule, Field string
	Line                    int
}

// accepted is a finding the test expects, and why it is a true one.
type accepted struct {
	finding
	why string
}

// hostNetworkWhy is why a hostNetwork pod with ClusterFirst is a finding.
const hostNetworkWhy = "hostNetwork with dnsPolicy ClusterFirst: kubelet gives the pods the node's resolv.conf, as Default does (pkg/kubelet/network/dns getPodDNSType)"

var charts = []struct {
	dir string
	// stdin: the chart's one file is piped, as helm template | validate -f -.
	stdin     bool
	exit      int
	templates int // pod templates read: a check that the input is what the case means
	skipped   []string
	want      []accepted
}{
	{"ingress-nginx-hostnetwork", true, 0, 3, nil, []accepted{
		{finding{"DaemonSet", "ingress-nginx-controller", "warning", "spec.template.spec.dnsPolicy", 351}, hostNetworkWhy + "; the chart writes ClusterFirst"},
	}},
	{"ingress-nginx-set-int", true, 1, 3, nil, []accepted{
		{finding{"Deployment", "ingress-nginx-controller", "api", "spec.template.spec.dnsConfig.options[0].value", 355}, "helm --set made the value 2 a number; the API server decodes PodDNSConfigOption.value as a string and refuses the object"},
	}},
	{"prometheus-node-exporter", true, 0, 1, nil, []accepted{
		{finding{"DaemonSet", "node-exporter-prometheus-node-exporter", "warning", "spec.template.spec.dnsPolicy", 141}, hostNetworkWhy + "; no dnsPolicy is written, so the line is hostNetwork's"},
	}},
	{"kube-prometheus-stack", true, 0, 7, []string{"Alertmanager.monitoring.coreos.com", "CustomResourceDefinition.apiextensions.k8s.io", "Prometheus.monitoring.coreos.com"}, []accepted{
		{finding{"DaemonSet", "kps-prometheus-node-exporter", "warning", "spec.template.spec.dnsPolicy", 76972}, hostNetworkWhy + " (the node-exporter subchart)"},
	}},
	// 4: the controller and server Deployments, a Job, and the Workflow.
	{"argo-workflows", false, 0, 4, []string{"ClusterRole.rbac.authorization.k8s.io"}, nil},
	{"metrics-server", true, 0, 1, []string{"APIService.apiregistration.k8s.io"}, nil},
}

// report is the part of validate -o json the test reads.
type report struct {
	Results []struct {
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Findings []struct {
			Rule  string `json:"rule"`
			Field string `json:"field"`
			Line  int    `json:"line"`
		} `json:"findings"`
	} `json:"results"`
	Summary struct {
		Templates    int `json:"templates"`
		SkippedKinds []struct {
			Kind string `json:"kind"`
		} `json:"skippedKinds"`
	} `json:"summary"`
}

// TestCharts: validate finds exactly the accepted findings in each chart,
// with their lines, in JSON, text and SARIF (a valid SARIF 2.1.0 log with
// one result a finding), and exits as a CI job needs.
func TestCharts(t *testing.T) {
	bin := buildbin.Dnsconfigurer(t)
	schema := sarifSchema(t)
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			args, stdin := input(t, c.dir, c.stdin)
			out, code := validate(t, bin, stdin, append(args, "-o", "json")...)
			if code != c.exit {
				t.Errorf("exit %d, want %d", code, c.exit)
			}
			var r report
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("validate -o json: %v\n%s", err, out)
			}
			var got []finding
			for _, res := range r.Results {
				for _, f := range res.Findings {
					got = append(got, finding{res.Kind, res.Name, f.Rule, f.Field, f.Line})
				}
			}
			var want []finding
			for _, a := range c.want {
				want = append(want, a.finding)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("findings:\n got  %+v\n want %+v", got, want)
			}
			if r.Summary.Templates != c.templates {
				t.Errorf("%d pod templates read, want %d", r.Summary.Templates, c.templates)
			}
			for _, res := range r.Results {
				if res.Kind == "Workflow" {
					t.Logf("Workflow %q linted at its known path (spec)", res.Name)
				}
			}
			skipped := map[string]bool{}
			for _, k := range r.Summary.SkippedKinds {
				skipped[k.Kind] = true
			}
			for _, k := range c.skipped {
				if !skipped[k] {
					t.Errorf("kind %s is not named as skipped: %+v", k, r.Summary.SkippedKinds)
				}
			}
			text, _ := validate(t, bin, stdin, args...)
			for _, f := range want {
				if loc := fileLine(c.dir, c.stdin, f.Line); !strings.Contains(string(text), loc+" ") {
					t.Errorf("text output has no finding at %s:\n%s", loc, text)
				}
			}
			sarif, scode := validate(t, bin, stdin, append(args, "-o", "sarif")...)
			if scode != code {
				t.Errorf("exit %d with -o sarif, %d with -o json", scode, code)
			}
			checkSARIF(t, schema, sarif, len(want))
			for _, a := range c.want {
				t.Logf("accepted: %s %s %s:%d: %s", a.Kind, a.Name, a.Field, a.Line, a.why)
			}
		})
	}
}

// input is the validate arguments and stdin for a chart directory.
func input(t *testing.T, dir string, stdin bool) ([]string, []byte) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in testdata/%s: %v", dir, err)
	}
	if stdin {
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		return []string{"-f", "-"}, data
	}
	var args []string
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return args, nil
}

func fileLine(dir string, stdin bool, line int) string {
	if stdin {
		return "stdin:" + strconv.Itoa(line)
	}
	return filepath.Join("testdata", dir, "rendered.yaml") + ":" + strconv.Itoa(line)
}

// validate runs dnsconfigurer validate and returns stdout and the exit code.
func validate(t *testing.T, bin string, stdin []byte, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"validate"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &exit):
		return append(out, stderr.Bytes()...), exit.ExitCode()
	}
	t.Fatalf("validate %v: %v\n%s", args, err, stderr.String())
	return nil, 0
}

// sarifSchema compiles the OASIS SARIF 2.1.0 schema (the copy
// cmd/dnsconfigurer's tests check against).
func sarifSchema(t *testing.T) *jsonschema.Schema {
	return testkit.SARIFSchema(t, "../../cmd/dnsconfigurer/testdata/lint/sarif-schema-2.1.0.json")
}

func checkSARIF(t *testing.T, schema *jsonschema.Schema, out []byte, results int) {
	t.Helper()
	testkit.CheckSARIF(t, schema, out)
	var log struct {
		Runs []struct {
			Results []json.RawMessage `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out, &log); err != nil || len(log.Runs) != 1 || len(log.Runs[0].Results) != results {
		t.Errorf("-o sarif: %v, want one run with %d results", err, results)
	}
}
