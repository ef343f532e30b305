package deploy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// TestCommandFlags: the binary knows every flag the manifests pass it.
// Each container's arguments are parsed up to a final -h, which stops the
// command before it does anything; an unknown or malformed flag fails the
// parse first.
func TestCommandFlags(t *testing.T) {
	o := loadSources(t)
	bin := buildbin.Dnsconfigurer(t)
	n := 0
	for _, w := range o.workloads() {
		for _, c := range w.spec.Containers {
			if len(c.Args) == 0 {
				t.Errorf("%s %s container %s: no args (the image's entrypoint is the binary: args start with the subcommand)", w.kind, w.name, c.Name)
				continue
			}
			n++
			checkFlagsParse(t, bin, w.kind+" "+w.name, c.Args)
		}
	}
	if n != 4 {
		t.Errorf("checked %d dnsconfigurer containers, want 4", n)
	}
}

// checkFlagsParse runs bin with args and a final -h. Help exits 0 or 2
// depending on the subcommand; a bad flag is told by the flag package's
// messages.
func checkFlagsParse(t *testing.T, bin, where string, args []string) {
	t.Helper()
	out, _ := exec.CommandContext(t.Context(), bin, append(slices.Clone(args), "-h")...).CombinedOutput()
	if !strings.Contains(string(out), "usage:") || strings.Contains(string(out), "provided but not defined") ||
		strings.Contains(string(out), "invalid value") || strings.Contains(string(out), "bad flag syntax") {
		t.Errorf("%s: dnsconfigurer %s -h:\n%s", where, strings.Join(args, " "), out)
	}
}

// TestNodeLocalDaemonSet runs the node-local DaemonSet's container in a
// network namespace standing in for a node, with its exact arguments and a
// separate lock file: a stub cluster DNS at that upstream address,
// a stub node resolver in the node's resolv.conf. The binary sets the node
// up itself: both --local-ip addresses answer over UDP and TCP, cluster
// names from the cluster stub, and an external name from where the
// DaemonSet's --external sends it (the cluster stub by default, the node's
// resolver with direct; the two answer it differently), the probes answer
// 200, and after SIGTERM the addresses and the notrack table are gone (so
// that the Service IP is the cluster DNS's again). Needs root and ip(8).
func TestNodeLocalDaemonSet(t *testing.T) {
	netns.Require(t)
	o := loadSources(t)
	w := o.workload(t, "DaemonSet", "dnsconfigurer-node-local-dns")
	if len(w.spec.InitContainers) != 0 || len(w.spec.Containers) != 1 {
		t.Fatalf("node-local: %d init containers and %d containers, want 0 and 1", len(w.spec.InitContainers), len(w.spec.Containers))
	}
	c := w.spec.Containers[0]
	bin := buildbin.Dnsconfigurer(t)
	ns := netns.New(t)
	const nodeResolver = "192.0.2.53"
	ns.SetResolvConf(t, "nameserver "+nodeResolver+"\nsearch node.example\n")
	// The cluster DNS's ServerConfiguration, as the ConfigMap mounts it.
	clusterConfig := filepath.Join(t.TempDir(), "config.yaml")
	for _, cm := range o.configMaps {
		if cm.Name == "dnsconfigurer-dns" {
			if err := os.WriteFile(clusterConfig, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	args := c.Args
	for i, a := range args {
		if strings.HasPrefix(a, "--cluster-config=") {
			args[i] = "--cluster-config=" + clusterConfig
		}
	}
	args = append(args, "--lock-file="+filepath.Join(t.TempDir(), "node-local.lock"))
	ips := flagAll(args, "local-ip")
	if len(ips) != 2 {
		t.Fatalf("--local-ip %q, want the Service address and the link-local one", ips)
	}
	upstreamService, _ := flag(args, "cluster-upstream")
	external, ok := flag(args, "external")
	if !ok {
		external = v1alpha1.DefaultNodeLocalExternal
	}

	// The cluster DNS behind the upstream Service, and the node's resolver.
	// Each answers the external name its own way, so the answer tells which
	// one was asked.
	const clusterName, clusterAnswer = "kubernetes.default.svc.cluster.local.", "10.96.0.1"
	const externalName = "www.example.com."
	const externalViaCluster, externalDirect = "192.0.2.81", "192.0.2.80"
	ns.AddAddress(t, upstreamService+"/32")
	ns.AddAddress(t, nodeResolver+"/32")
	stubDNS(t, ns, net.JoinHostPort(upstreamService, "53"), map[string]string{clusterName: clusterAnswer, externalName: externalViaCluster})
	stubDNS(t, ns, net.JoinHostPort(nodeResolver, "53"), map[string]string{externalName: externalDirect})
	var externalAnswer string
	switch external {
	case v1alpha1.ExternalCluster:
		externalAnswer = externalViaCluster
	case v1alpha1.ExternalDirect:
		externalAnswer = externalDirect
	default:
		t.Fatalf("--external=%s, want %s or %s", external, v1alpha1.ExternalCluster, v1alpha1.ExternalDirect)
	}

	// The container, stopped as kubelet stops it: SIGTERM.
	ctx, cancel := context.WithCancel(t.Context())
	cmd := ns.Exec(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	logs, err := os.Create(filepath.Join(t.TempDir(), "node-local.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		// After Cancel, a clean exit is reported as the context's error.
		if err := cmd.Wait(); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("dnsconfigurer %s:\n%s", strings.Join(args, " "), b)
		}
	})

	probe := func(p *corev1.Probe) (int, error) {
		port, err := probePort(w, c, p)
		if err != nil {
			return 0, err
		}
		return httpGet(ns, net.JoinHostPort(p.HTTPGet.Host, fmt.Sprint(port)), p.HTTPGet.Path)
	}
	testkit.WaitFor(t, 20*time.Second, func() error {
		if code, err := probe(c.ReadinessProbe); code != http.StatusOK {
			return fmt.Errorf("readiness probe %s: %d %v", c.ReadinessProbe.HTTPGet.Path, code, err)
		}
		return nil
	})
	if code, err := probe(c.LivenessProbe); code != http.StatusOK {
		t.Errorf("liveness probe %s: %d %v", c.LivenessProbe.HTTPGet.Path, code, err)
	}
	// Ready means serving; the notrack table follows at once.
	waitSetup(t, ns, ips, true)

	for _, ip := range ips {
		for _, proto := range []string{"udp", "tcp"} {
			for name, want := range map[string]string{clusterName: clusterAnswer, externalName: externalAnswer} {
				var r *dns.Msg
				err := ns.Do(func() error {
					var err error
					r, _, err = (&dns.Client{Net: proto, Timeout: 2 * time.Second}).Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), net.JoinHostPort(ip, "53"))
					return err
				})
				if err != nil {
					t.Errorf("%s query for %s to %s: %v", proto, name, ip, err)
					continue
				}
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "\t"+want) {
					t.Errorf("%s query for %s to %s (external %s): rcode %s, answer %v; want %s", proto, name, ip, external, dns.RcodeToString[r.Rcode], r.Answer, want)
				}
			}
		}
	}

	if err := stop(); err != nil {
		t.Errorf("node-local after SIGTERM: %v", err)
	}
	waitSetup(t, ns, ips, false)
}

// waitSetup waits until both addresses and the notrack table are in the
// namespace (present) or all gone.
func waitSetup(t *testing.T, ns *netns.NS, ips []string, present bool) {
	t.Helper()
	var addrs []netip.Addr
	for _, ip := range ips {
		addrs = append(addrs, netip.MustParseAddr(ip))
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		f, err := os.Open(ns.Path)
		if err != nil {
			t.Fatal(err)
		}
		table, err := nodenet.NewNftNotrack(int(f.Fd())).Present(addrs, 53)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out, err := ns.Exec(t.Context(), "ip", "-o", "addr", "show").CombinedOutput()
		if err != nil {
			t.Fatalf("ip addr: %v: %s", err, out)
		}
		n := 0
		for _, ip := range ips {
			n += strings.Count(string(out), " "+ip+"/32 ")
		}
		if present && table && n == len(ips) || !present && !table && n == 0 {
			return nil
		}
		return fmt.Errorf("want the set-up present %v: notrack table %v, %d of the addresses %q:\n%s", present, table, n, ips, out)
	})
}

// stubDNS answers the A query of each name in answers (lower case) with
// its address at addr over UDP and TCP inside ns, and NXDOMAIN for anything
// else.
func stubDNS(t *testing.T, ns *netns.NS, addr string, answers map[string]string) {
	t.Helper()
	testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, m *dns.Msg) {
		if answer, ok := answers[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, testkit.A(q.Name, 5, answer))
		} else {
			m.Rcode = dns.RcodeNameError
		}
	}), testkit.At(addr), testkit.ListenIn(ns.Do))
}

// httpGet asks for path at addr from inside ns with a plain HTTP/1.0
// request (the connection is opened on a thread in the namespace) and
// returns the status code.
func httpGet(ns *netns.NS, addr, path string) (int, error) {
	var conn net.Conn
	err := ns.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, time.Second)
		return err
	})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode == 0 {
		return 0, errors.New("no status")
	}
	return resp.StatusCode, nil
}
