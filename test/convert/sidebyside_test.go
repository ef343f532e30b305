package convert_test

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/corefile"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

var controlPlane *apiserver.ControlPlane

func TestMain(m *testing.M) {
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	code := apiserver.RunTests(m, &controlPlane)
	buildbin.Remove()
	os.Exit(code)
}

const examples = "../../pkg/corefile/testdata/"

// startBound is how long both servers get to answer the cluster's first
// name (the API server sync on a loaded two-core machine).
const startBound = 60 * time.Second

// example is one input converted and run side by side.
type example struct {
	name string
	// input is the Corefile or ConfigMap converted; coredns is what CoreDNS
	// runs (default: the input's Corefile).
	input, coredns string
	custom         string            // imported files (k3s, AKS coredns-custom)
	upstreams      map[string]string // upstream in the input → "default", "default2" or "stub"
	exit           int               // convert's exit code
	corednsDrop    string            // a line CoreDNS 1.15 refuses, left out of its Corefile
	extra          []question        // besides the common questions
}

type question struct {
	name  string
	qtype uint16
}

var sideExamples = []example{
	{name: "kubeadm", input: "kubeadm/Corefile", upstreams: map[string]string{"/etc/resolv.conf": "default"}},
	{name: "k3s", input: "k3s/configmap.yaml", custom: "k3s/custom",
		upstreams: map[string]string{"/etc/resolv.conf": "default", "10.20.0.53": "stub"},
		extra: []question{{"k3s-server.", dns.TypeA}, {"x.corp.example.", dns.TypeA}, {"nx.corp.example.", dns.TypeA},
			// The rewrite override: NXDOMAIN from both, since
			// registry.kube-system has no Service here; not rewritten, it
			// would be forwarded and the fake upstream would answer.
			{"registry.local.", dns.TypeA}}},
	{name: "kube-dns", input: "kubedns/configmap.yaml", coredns: "testdata/kubedns.Corefile",
		upstreams: map[string]string{"8.8.8.8": "default", "8.8.4.4": "default2", "1.2.3.4": "stub"},
		extra:     []question{{"x.acme.local.", dns.TypeA}}},
	{name: "minikube", input: "minikube/Corefile", upstreams: map[string]string{"/etc/resolv.conf": "default"},
		extra: []question{{"host.minikube.internal.", dns.TypeA}}},
	{name: "kops", input: "kops/Corefile", upstreams: map[string]string{"/etc/resolv.conf": "default"}},
	{name: "eks", input: "eks/Corefile", upstreams: map[string]string{"/etc/resolv.conf": "default"}},
	{name: "eks-multiregion", input: "eks-multiregion/Corefile", upstreams: map[string]string{"/etc/resolv.conf": "default", "10.1.2.3": "stub"},
		extra: []question{{"web.paris.svc.cluster.local.", dns.TypeA}, {"paris.svc.cluster.local.", dns.TypeA}}},
	{name: "aks", input: "aks/configmap.yaml", custom: "aks/custom",
		upstreams: map[string]string{"/etc/resolv.conf": "default", "192.11.0.1": "stub"},
		extra: []question{{"x.puglife.world.", dns.TypeA},
			// The regex rewrite and its answer name: web and db are Services.
			{"web.example.com.", dns.TypeA}, {"db.example.com.", dns.TypeA}, {"nope.example.com.", dns.TypeA}}},
}

// common are the questions every example is asked: cluster names, pod
// names, external names, reverse names.
func common(webIP string) []question {
	return []question{
		{"web.default.svc.cluster.local.", dns.TypeA},
		{"web.default.svc.cluster.local.", dns.TypeAAAA},
		{"db.default.svc.cluster.local.", dns.TypeA},
		{"_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV},
		{"_http._tcp.db.default.svc.cluster.local.", dns.TypeSRV},
		{"nope.default.svc.cluster.local.", dns.TypeA},
		{"10-1-2-3.default.pod.cluster.local.", dns.TypeA},
		{"example.org.", dns.TypeA},
		{"nx.example.org.", dns.TypeA},
		{webIP, dns.TypePTR},
		{"1.2.0.192.in-addr.arpa.", dns.TypePTR},
	}
}

// TestSideBySide: for each example, CoreDNS 1.15 with the original and
// serve with the converted configuration give the same rcode and answer
// section (TTLs and order aside) to every question.
func TestSideBySide(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	webIP := objects(t, cp.Client())
	corednsBin := filepath.Join(os.Getenv(apiserver.EnvBinDir), "coredns")
	if _, err := os.Stat(corednsBin); err != nil {
		t.Skipf("no coredns in $%s: %v", apiserver.EnvBinDir, err)
	}
	for _, ex := range sideExamples {
		t.Run(ex.name, func(t *testing.T) {
			dir := t.TempDir()
			up := map[string]string{"default": fakeUpstream(t, externalIP), "default2": fakeUpstream(t, externalIP), "stub": fakeUpstream(t, stubIP)}
			rw := rewriter(t, dir, cp.Kubeconfig(), ex, up)
			input, corefileText := ex.prepare(t, dir, rw)
			cd, cdExited := startCoreDNS(t, corednsBin, dir, corefileText)
			config := filepath.Join(dir, "config.yaml")
			args := []string{"convert", "--output", config, input}
			if ex.custom != "" {
				args = []string{"convert", "--import-dir", filepath.Join(dir, "custom"), "--output", config, input}
			}
			out, err := exec.Command(buildbin.Dnsconfigurer(t), args...).CombinedOutput()
			if code := exitCode(err); code != ex.exit {
				t.Fatalf("convert: exit %d, want %d:\n%s", code, ex.exit, out)
			}
			t.Logf("convert report:\n%s", out)
			// kube-dns has no kubeconfig of its own (in-cluster config).
			dc := buildbin.StartServeArgs(t, "127.0.0.1:0", "--config", config, "--kubeconfig", cp.Kubeconfig())
			qs := append(common(reverse(t, webIP)), ex.extra...)
			for _, addr := range []string{cd, dc.DNS} {
				testkit.WaitFor(t, startBound, func() error {
					select {
					case <-cdExited:
						t.Fatal("coredns exited")
					case <-dc.Exited():
						t.Fatal("dnsconfigurer serve exited")
					default:
					}
					got, err := ask(addr, qs[0])
					if err == nil && !strings.HasPrefix(got, "NOERROR [web") {
						err = fmt.Errorf("%s: %s", addr, got)
					}
					return err
				})
			}
			for _, q := range qs {
				want, err := ask(cd, q)
				if err != nil {
					t.Errorf("coredns: %v", err)
					continue
				}
				got, err := ask(dc.DNS, q)
				if err != nil {
					t.Errorf("dnsconfigurer: %v", err)
					continue
				}
				if got != want {
					t.Errorf("%s %s:\n  coredns:       %s\n  dnsconfigurer: %s", q.name, dns.TypeToString[q.qtype], want, got)
				}
			}
		})
	}
}

// prepare writes the rewritten input, imports and CoreDNS's Corefile into
// dir; it returns the input's path and CoreDNS's Corefile.
func (ex example) prepare(t *testing.T, dir string, rw func(string) string) (string, string) {
	t.Helper()
	raw, err := os.ReadFile(examples + ex.input)
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, filepath.Base(ex.input))
	write(t, input, rw(string(raw)))
	text := string(raw)
	if data, ok, _ := corefile.ConfigMapData(raw); ok {
		text = data["Corefile"]
		for k, v := range data {
			if k != "Corefile" {
				write(t, filepath.Join(dir, "keys", k), v)
			}
		}
	}
	if ex.coredns != "" {
		b, err := os.ReadFile(ex.coredns)
		if err != nil {
			t.Fatal(err)
		}
		text = string(b)
	}
	if ex.custom != "" {
		files, _ := filepath.Glob(examples + ex.custom + "/*")
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "custom", filepath.Base(f)), rw(string(b)))
		}
	}
	if ex.corednsDrop != "" {
		text = regexp.MustCompile(`(?m)^\s*`+ex.corednsDrop+`\s*\n`).ReplaceAllString(text, "")
	}
	return input, rw(text)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	serverKey = regexp.MustCompile(`(?m)^(\s*)(\S+):53 \{`)
	healthRe  = regexp.MustCompile(`(?m)^(\s*)(health|ready)\b`)
	promRe    = regexp.MustCompile(`prometheus :9153`)
)

// rewriter points an input at the test's servers: loopback ports instead of
// :53, :8080, :8181 and :9153, the fake upstreams, the API server's
// kubeconfig, and files under dir instead of /etc/coredns.
func rewriter(t *testing.T, dir, kubeconfig string, ex example, up map[string]string) func(string) string {
	_, port, _ := net.SplitHostPort(testkit.FreeAddr(t, "127.0.0.1"))
	health, ready, metrics := testkit.FreeAddr(t, "127.0.0.1"), testkit.FreeAddr(t, "127.0.0.1"), testkit.FreeAddr(t, "127.0.0.1")
	return func(s string) string {
		keys := make([]string, 0, len(ex.upstreams))
		for k := range ex.upstreams {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s = strings.ReplaceAll(s, k, up[ex.upstreams[k]])
		}
		s = serverKey.ReplaceAllString(s, "${1}${2}:"+port+" {\n${1}  bind 127.0.0.1")
		s = healthRe.ReplaceAllStringFunc(s, func(m string) string {
			if strings.HasSuffix(m, "health") {
				return m + " " + health
			}
			return m + " " + ready
		})
		s = promRe.ReplaceAllString(s, "prometheus "+metrics)
		s = strings.ReplaceAll(s, "pods insecure", "pods insecure\n       kubeconfig "+kubeconfig)
		s = strings.ReplaceAll(s, "/etc/coredns/NodeHosts", filepath.Join(dir, "keys", "NodeHosts"))
		s = strings.ReplaceAll(s, "import /etc/coredns/custom/", "import "+dir+"/custom/")
		return strings.ReplaceAll(s, "import custom/", "import "+dir+"/custom/")
	}
}

// startCoreDNS runs coredns on corefile (its addresses are the test's) and
// returns its DNS address and a channel closed when it exits.
func startCoreDNS(t *testing.T, bin, dir, corefile string) (string, <-chan struct{}) {
	t.Helper()
	path := filepath.Join(dir, "Corefile.coredns")
	write(t, path, corefile)
	addr := regexp.MustCompile(`bind (127\.0\.0\.1)`).FindStringSubmatch(corefile)
	port := regexp.MustCompile(`\.:(\d+) \{`).FindStringSubmatch(corefile)
	if addr == nil || port == nil {
		t.Fatalf("no address in the Corefile:\n%s", corefile)
	}
	_, exited := runCoreDNS(t, exec.Command(bin, "-conf", path), "\nCorefile:\n"+corefile)
	return net.JoinHostPort(addr[1], port[1]), exited
}

// runCoreDNS starts cmd, a coredns command, and returns its output and a
// channel closed when it exits. It is killed when t ends, and its output
// (then more) logged when t failed.
func runCoreDNS(t *testing.T, cmd *exec.Cmd, more string) (*testkit.Buffer, <-chan struct{}) {
	t.Helper()
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("coredns output:\n%s%s", out.String(), more)
		}
	})
	return out, exited
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// ask sends q over UDP and returns its rcode and answer section with TTLs
// zeroed and records sorted.
func ask(addr string, q question) (string, error) {
	r, err := testkit.Exchange("udp", addr, q.name, q.qtype)
	if err != nil {
		return "", fmt.Errorf("%s %s at %s: %w", q.name, dns.TypeToString[q.qtype], addr, err)
	}
	var rrs []string
	for _, rr := range r.Answer {
		rr.Header().Ttl = 0
		rrs = append(rrs, rr.String())
	}
	slices.Sort(rrs)
	return dns.RcodeToString[r.Rcode] + " [" + strings.Join(rrs, "; ") + "]", nil
}
