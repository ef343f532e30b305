package nodelocal

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// Addresses of the test's node.
const (
	linkLocal   = "169.254.20.10"
	serviceIP   = "10.96.0.10" // the cluster DNS Service IP that node-local takes over
	upstreamIP  = "10.96.0.11" // the cluster DNS pods' own Service (kube-dns-upstream)
	clusterDNS  = "10.233.6.1" // where kube-proxy's DNAT sends both: the cluster DNS stub
	externalDNS = "10.233.7.1" // the node's nameserver
	podIP       = "10.233.5.2"
	nodeVethIP  = "10.233.5.1"
	clusterName = "web.prod.svc.cluster.local."
)

// stub is a DNS server on port 53 of addr in ns that answers every A
// question with answer and records who asked what.
type stub struct{ *testkit.Upstream }

// count counts the queries for name over proto ("" any) from the address
// from (invalid: any).
func (s stub) count(name, proto string, from netip.Addr) int {
	n := 0
	for _, q := range s.Queries() {
		var ip net.IP
		switch a := q.From.(type) {
		case *net.UDPAddr:
			ip = a.IP
		case *net.TCPAddr:
			ip = a.IP
		}
		addr, _ := netip.AddrFromSlice(ip)
		if q.Msg.Question[0].Name == name && (proto == "" || q.Net == proto) && (!from.IsValid() || addr.Unmap() == from) {
			n++
		}
	}
	return n
}

func startStub(t *testing.T, ns *netns.NS, addr, answer string) stub {
	t.Helper()
	return stub{testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, m *dns.Msg) {
		if q.Qtype == dns.TypeA {
			m.Answer = []dns.RR{testkit.A(q.Name, 300, answer)}
		}
	}), testkit.At(addr+":53"), testkit.ListenIn(ns.Do))}
}

// query asks server:53 from inside ns, over UDP, with one retry after
// 500 ms; it returns the A record's address ("" on failure) and the tries.
func query(ns *netns.NS, server, name string) (string, int) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	var got string
	tries := 0
	ns.Do(func() error {
		c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
		for tries < 2 {
			tries++
			r, _, err := c.Exchange(m, server+":53")
			if err == nil && len(r.Answer) == 1 {
				got = r.Answer[0].(*dns.A).A.String()
				return nil
			}
		}
		return nil
	})
	return got, tries
}

// node is the test's node: namespaces, veth, DNAT rules, stubs.
type node struct {
	node, pod         *netns.NS
	cluster, external stub
	resolvConf, lock  string
}

func newNode(t *testing.T) *node {
	t.Helper()
	netns.Require(t)
	for _, tool := range []string{"iptables", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (bash test/e2e/setup.sh installs it)", tool)
		}
	}
	n := &node{node: netns.New(t), pod: netns.New(t)}
	veth := "nl" + n.pod.Name[len(n.pod.Name)-6:]
	n.node.IP(t, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.pod.Path)
	n.node.IP(t, "addr", "add", nodeVethIP+"/24", "dev", veth)
	n.node.IP(t, "link", "set", veth, "up")
	n.pod.IP(t, "addr", "add", podIP+"/24", "dev", "eth0")
	n.pod.IP(t, "link", "set", "eth0", "up")
	n.pod.IP(t, "route", "add", "default", "via", nodeVethIP)
	// The Service CIDR is routed (any route will do: kube-proxy's DNAT
	// rewrites the destination after the routing decision).
	n.node.IP(t, "route", "add", "10.96.0.0/12", "dev", veth)
	n.node.AddAddress(t, clusterDNS+"/32")
	n.node.AddAddress(t, externalDNS+"/32")
	// kube-proxy (iptables mode): both Service IPs DNAT to the cluster DNS,
	// for pods (PREROUTING) and the node itself (OUTPUT).
	for _, rule := range [][]string{
		{"PREROUTING", "-d", serviceIP, "-p", "udp"}, {"PREROUTING", "-d", serviceIP, "-p", "tcp"},
		{"OUTPUT", "-d", serviceIP, "-p", "udp"}, {"OUTPUT", "-d", upstreamIP, "-p", "tcp"},
		{"OUTPUT", "-d", upstreamIP, "-p", "udp"},
	} {
		args := append([]string{"netns", "exec", n.node.Name, "iptables", "-t", "nat", "-A"}, rule...)
		args = append(args, "--dport", "53", "-j", "DNAT", "--to-destination", clusterDNS+":53")
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v: %s", rule, err, out)
		}
	}
	n.cluster = startStub(t, n.node, clusterDNS, "10.0.0.1")
	n.external = startStub(t, n.node, externalDNS, "192.0.2.1")
	dir := t.TempDir()
	n.resolvConf = filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(n.resolvConf, []byte("nameserver "+externalDNS+"\nsearch example.internal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.lock = filepath.Join(dir, "run", "node-local.lock")
	return n
}

// instance is one running node-local process.
type instance struct {
	cmd     *exec.Cmd
	metrics string
	lines   chan string
	done    chan error
}

// start runs node-local in the node namespace and waits until its notrack
// table is in place (or, for a second instance, until it serves).
func (n *node) start(t *testing.T, metricsPort int, waitFor string, extra ...string) *instance {
	t.Helper()
	args := append([]string{"serve", "--mode", "node-local", "--local-ip", linkLocal + "," + serviceIP,
		"--setup-interface", "--setup-notrack", "--cluster-upstream", upstreamIP, "--resolv-conf", n.resolvConf, "--external", "direct",
		"--lock-file", n.lock, "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--reuse-port",
		"--lameduck", "1s"}, extra...)
	cmd := n.node.Exec(context.Background(), buildbin.Dnsconfigurer(t), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{cmd: cmd, metrics: fmt.Sprintf("127.0.0.1:%d", metricsPort), lines: make(chan string, 256), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("node-local[%d]: %s", cmd.Process.Pid, sc.Text())
			select {
			case in.lines <- sc.Text():
			default:
			}
		}
		close(in.lines)
		in.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	in.waitLog(t, waitFor)
	return in
}

func (in *instance) waitLog(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-in.lines:
			if !ok {
				t.Fatalf("node-local exited before logging %q", msg)
			}
			if strings.Contains(l, msg) {
				return
			}
		case <-timeout:
			t.Fatalf("node-local did not log %q within 20s", msg)
		}
	}
}

// stop sends SIGTERM and waits for the exit.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	in.cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		for range in.lines {
		}
	}()
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("node-local exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("node-local still running 15s after SIGTERM")
	}
}

// requests is the queries the instance answered from its cache or
// upstream (dnsconfigurer_nodelocal_cache_hits_total and _misses_total),
// read from its /metrics inside the node namespace.
func (n *node) requests(t *testing.T, in *instance) float64 {
	t.Helper()
	var body []byte
	if err := n.node.Do(func() error {
		c, err := net.DialTimeout("tcp", in.metrics, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
		body, err = io.ReadAll(c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "dnsconfigurer_nodelocal_cache_hits_total{") || strings.HasPrefix(l, "dnsconfigurer_nodelocal_cache_misses_total{") {
			var v float64
			fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
			sum += v
		}
	}
	return sum
}

// setupPresent reports whether the notrack table and both addresses are in
// the node namespace.
func (n *node) setupPresent(t *testing.T) (table, addrs bool) {
	t.Helper()
	ips := []netip.Addr{netip.MustParseAddr(linkLocal), netip.MustParseAddr(serviceIP)}
	table, err := nodenet.NewNftNotrack(int(n.node.Open(t).Fd())).Present(ips, 53)
	if err != nil {
		t.Fatal(err)
	}
	return table, n.node.HasAddresses(t, ips...)
}

// conntrackTo lists the node's conntrack entries of UDP to ip port 53.
func (n *node) conntrackTo(t *testing.T, ip string) string {
	t.Helper()
	out, _ := exec.Command("ip", "netns", "exec", n.node.Name, "conntrack", "-L", "-p", "udp", "--orig-dst", ip, "--dport", "53").CombinedOutput()
	var entries []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "udp") {
			entries = append(entries, l)
		}
	}
	return strings.Join(entries, "\n")
}

// TestTransparent: a pod's queries to the cluster DNS Service IP are
// answered by node-local (untracked, counted), cluster names go to the
// cluster DNS over TCP and other names to the node's nameserver, and once
// node-local stops the Service IP falls back to the cluster DNS.
func TestTransparent(t *testing.T) {
	n := newNode(t)
	pod := netip.MustParseAddr(podIP)

	// Before node-local: kube-proxy's DNAT takes the query to the cluster DNS.
	if got, _ := query(n.pod, serviceIP, clusterName); got != "10.0.0.1" {
		t.Fatalf("before node-local: %s answered %q", serviceIP, got)
	}
	if c := n.cluster.count(clusterName, "udp", pod); c != 1 {
		t.Fatalf("cluster DNS saw %d UDP queries from the pod, want 1", c)
	}
	if table, addrs := n.setupPresent(t); table || addrs {
		t.Fatalf("setup present before node-local: table %v, addresses %v", table, addrs)
	}
	exec.Command("ip", "netns", "exec", n.node.Name, "conntrack", "-F").Run()

	nl := n.start(t, 9353, "notrack table in place")
	if table, addrs := n.setupPresent(t); !table || !addrs {
		t.Fatalf("setup after start: table %v, addresses %v", table, addrs)
	}
	before := n.requests(t, nl)
	const asks = 5
	for i := range asks {
		if got, _ := query(n.pod, serviceIP, clusterName); got != "10.0.0.1" {
			t.Fatalf("query %d to %s through node-local: %q", i, serviceIP, got)
		}
	}
	if got := n.requests(t, nl) - before; got < asks {
		t.Errorf("node-local counted %v queries, want at least %d", got, asks)
	}
	if c := n.cluster.count(clusterName, "udp", pod); c != 1 {
		t.Errorf("cluster DNS saw %d UDP queries from the pod, want still 1: node-local did not answer the Service IP", c)
	}
	if c := n.cluster.count(clusterName, "tcp", netip.Addr{}); c != 1 {
		t.Errorf("cluster DNS saw %d TCP queries for %s, want 1 (node-local's miss, then its cache)", c, clusterName)
	}
	if ct := n.conntrackTo(t, serviceIP); ct != "" {
		t.Errorf("conntrack entries for the Service IP while node-local serves it:\n%s", ct)
	}
	// The link-local address, an external name: the node's nameserver.
	if got, _ := query(n.pod, linkLocal, "www.example.com."); got != "192.0.2.1" {
		t.Fatalf("www.example.com via %s: %q", linkLocal, got)
	}
	if c, cc := n.external.count("www.example.com.", "", netip.Addr{}), n.cluster.count("www.example.com.", "", netip.Addr{}); c != 1 || cc != 0 {
		t.Errorf("www.example.com reached the node's nameserver %d times and the cluster DNS %d times, want 1 and 0", c, cc)
	}
	if ct := n.conntrackTo(t, linkLocal); ct != "" {
		t.Errorf("conntrack entries for %s:\n%s", linkLocal, ct)
	}

	// Stop: the table and the addresses go; the Service IP is the cluster DNS's again.
	nl.stop(t)
	if table, addrs := n.setupPresent(t); table || addrs {
		t.Fatalf("setup left after the last instance stopped: table %v, addresses %v", table, addrs)
	}
	if got, _ := query(n.pod, serviceIP, clusterName); got != "10.0.0.1" {
		t.Fatalf("after node-local stopped: %s answered %q", serviceIP, got)
	}
	if c := n.cluster.count(clusterName, "udp", pod); c != 2 {
		t.Errorf("cluster DNS saw %d UDP queries from the pod, want 2 (the fallback)", c)
	}

	// --skip-teardown leaves everything in place.
	skip := n.start(t, 9353, "notrack table in place", "--skip-teardown")
	skip.stop(t)
	if table, addrs := n.setupPresent(t); !table || !addrs {
		t.Errorf("--skip-teardown removed the setup: table %v, addresses %v", table, addrs)
	}
	// A new instance adopts it; stopping it (no skip) removes it.
	adopt := n.start(t, 9353, "serving DNS")
	adopt.stop(t)
	if table, addrs := n.setupPresent(t); table || addrs {
		t.Errorf("setup left after the adopting instance stopped: table %v, addresses %v", table, addrs)
	}
}

// TestRollingRestart: a client querying the Service IP continuously while
// a new instance starts beside the old one (SO_REUSEPORT, a DaemonSet
// surge) and the old one stops loses no query, and the setup stays.
func TestRollingRestart(t *testing.T) {
	n := newNode(t)
	old := n.start(t, 9353, "notrack table in place")

	var sent, answered, retried atomic.Int64
	var lost []string
	var mu sync.Mutex
	stop := make(chan struct{})
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("q%d.prod.svc.cluster.local.", i) // a miss each: node-local forwards it
			sent.Add(1)
			got, tries := query(n.pod, serviceIP, name)
			switch {
			case got == "10.0.0.1":
				answered.Add(1)
				if tries > 1 {
					retried.Add(1)
				}
			default:
				mu.Lock()
				lost = append(lost, name)
				mu.Unlock()
			}
		}
	}()
	waitCount := func(min int64) {
		testkit.WaitFor(t, 10*time.Second, func() error {
			if n := answered.Load(); n < min {
				return fmt.Errorf("only %d answers, want %d", n, min)
			}
			return nil
		})
	}
	waitCount(20)
	next := n.start(t, 9353, "serving DNS")
	waitCount(answered.Load() + 20)
	old.stop(t)
	waitCount(answered.Load() + 50)
	close(stop)
	<-clientDone
	t.Logf("rolling restart: %d queries sent, %d answered (%d on the retry), %d lost", sent.Load(), answered.Load(), retried.Load(), len(lost))
	if len(lost) > 0 {
		t.Errorf("lost %d queries: %v", len(lost), lost)
	}
	if table, addrs := n.setupPresent(t); !table || !addrs {
		t.Errorf("the old instance removed the setup the new one uses: table %v, addresses %v", table, addrs)
	}
	next.stop(t)
	if table, addrs := n.setupPresent(t); table || addrs {
		t.Errorf("setup left after the last instance stopped: table %v, addresses %v", table, addrs)
	}
}

// kill ends the instance with SIGKILL: no teardown runs.
func (in *instance) kill(t *testing.T) {
	t.Helper()
	in.cmd.Process.Kill()
	go func() {
		for range in.lines {
		}
	}()
	select {
	case <-in.done:
	case <-time.After(15 * time.Second):
		t.Fatal("node-local still running 15s after SIGKILL")
	}
}

// TestRestartAfterKill (issue 27 item 9): node-local killed with SIGKILL
// (an OOM kill) leaves its addresses and notrack table, so the Service IP
// stays captured and a pod's query to it fails, until the next instance
// starts. That one, alone on the node, removes the table before anything
// else (the Service IP is the cluster DNS's while it starts), takes the
// addresses back as its own, installs the table once it serves, and
// removes everything when it stops.
func TestRestartAfterKill(t *testing.T) {
	n := newNode(t)
	killed := n.start(t, 9353, "notrack table in place")
	killed.kill(t)
	if table, addrs := n.setupPresent(t); !table || !addrs {
		t.Fatalf("after SIGKILL: table %v, addresses %v; want both left", table, addrs)
	}
	if got, _ := query(n.pod, serviceIP, clusterName); got != "" {
		t.Errorf("after SIGKILL the Service IP answered %q: want it captured, nothing listening", got)
	}

	begin := time.Now()
	next := n.start(t, 9353, "removed the notrack table")
	cleaned := time.Since(begin)
	next.waitLog(t, "notrack table in place")
	serving := time.Since(begin)
	t.Logf("the restarted instance removed the stale table %v after its start and took the Service IP back %v after it",
		cleaned.Round(time.Millisecond), serving.Round(time.Millisecond))
	if table, addrs := n.setupPresent(t); !table || !addrs {
		t.Fatalf("after the restart: table %v, addresses %v", table, addrs)
	}
	before := n.requests(t, next)
	if got, _ := query(n.pod, serviceIP, clusterName); got != "10.0.0.1" {
		t.Fatalf("after the restart: %s answered %q", serviceIP, got)
	}
	if got := n.requests(t, next) - before; got < 1 {
		t.Errorf("the restarted node-local counted %v queries, want the pod's", got)
	}
	next.stop(t)
	if table, addrs := n.setupPresent(t); table || addrs {
		t.Errorf("setup left after the restarted instance stopped: table %v, addresses %v", table, addrs)
	}
	if got, _ := query(n.pod, serviceIP, clusterName); got != "10.0.0.1" {
		t.Errorf("after the last stop: %s answered %q, want the cluster DNS's fallback", serviceIP, got)
	}
}
