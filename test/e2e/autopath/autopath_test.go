// Package autopath measures what issue 5 is about: how many DNS queries a
// pod's real stub resolver sends per lookup under ClusterFirst versus
// ClusterFirstWithAutopath, with and without the node-local stage, and that
// the answers are the same. It measures issue 28 too: what udpAnswerLimit
// saves glibc on a big headless Service.
//
// Everything runs in a network namespace the test creates: the cluster DNS
// (10.96.0.10), the node-local stage (169.254.20.10) and an upstream stub
// (192.0.2.53) are served in-process on sockets bound inside it, their
// outgoing queries use sockets opened inside it, and the lookups are glibc's
// getaddrinfo (`getent ahosts`), musl's (../testdata/lookup.c, static) and
// the pure Go resolver, run with `ip netns exec`, which shows them the
// rendered resolv.conf as /etc/resolv.conf.
package autopath

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/stubresolver"
)

// manifests are the cluster shop/web and other/db, shared with the chain
// test.
const manifests = "../testdata/shop.yaml"

// bigHeadless is the endpoint count of the headless Service "hl" in shop:
// its A answer (about 2 KB compressed) does not fit a 512-byte or a
// 1232-byte UDP reply, so every resolver but musl goes on to TCP.
const bigHeadless = 120

// answerLimit is the udpAnswerLimit of the second pass: the most A records
// of one name glibc 2.36's getaddrinfo takes in its first 1 KiB buffer
// (40 bytes an address, the name once), so it resolves hl in one round.
const answerLimit = 24

// headless returns the manifests of the headless Service shop/hl with n
// ready endpoints 10.244.<i/250>.<i%250+1>.
func headless(n int) string {
	var b strings.Builder
	b.WriteString("---\napiVersion: v1\nkind: Service\nmetadata: {name: hl, namespace: shop}\nspec: {clusterIP: None}\n")
	b.WriteString("---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: hl-1, namespace: shop, labels: {kubernetes.io/service-name: hl}}\naddressType: IPv4\nendpoints:\n")
	for i := range n {
		fmt.Fprintf(&b, "- addresses: [10.244.%d.%d]\n  conditions: {ready: true}\n", i/250, i%250+1)
	}
	return b.String()
}

// headlessAddrs is what a lookup of shop/hl returns, sorted as
// stubresolver sorts.
func headlessAddrs(n int) []string {
	var ips []string
	for i := range n {
		ips = append(ips, fmt.Sprintf("10.244.%d.%d", i/250, i%250+1))
	}
	sort.Strings(ips)
	return ips
}

// counter counts the queries a server receives, by type, and passes them
// to the handler of the current pass.
type counter struct {
	mu    sync.Mutex
	n     map[uint16]int
	names map[string]bool // the names asked since the last take
	h     dns.Handler
}

func (c *counter) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	c.mu.Lock()
	if len(r.Question) == 1 {
		c.n[r.Question[0].Qtype]++
		if c.names == nil {
			c.names = map[string]bool{}
		}
		c.names[strings.ToLower(r.Question[0].Name)] = true
	}
	h := c.h
	c.mu.Unlock()
	h.ServeDNS(w, r)
}

// set makes h answer the queries from now on.
func (c *counter) set(h dns.Handler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.h = h
}

func (c *counter) take() map[uint16]int {
	n, _ := c.takeNames()
	return n
}

// takeNames is take, with the distinct names asked.
func (c *counter) takeNames() (map[uint16]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, names := c.n, len(c.names)
	c.n, c.names = map[uint16]int{}, nil
	return n, names
}

// nsExchanger sends queries from sockets opened inside the namespace, so a
// server's forwarding never leaves it: over UDP, then TCP when the reply
// is truncated, or over TCP only (tcp).
type nsExchanger struct {
	ns   *netns.NS
	addr string
	tcp  bool
}

func (x nsExchanger) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	networks := []string{"udp", "tcp"}
	if x.tcp {
		networks = networks[1:]
	}
	for _, network := range networks {
		var conn net.Conn
		if err := x.ns.Do(func() (err error) {
			conn, err = net.Dial(network, x.addr)
			return err
		}); err != nil {
			return nil, err
		}
		c := &dns.Client{Net: network, Timeout: 2 * time.Second, UDPSize: dns.DefaultMsgSize}
		r, _, err := c.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn})
		conn.Close()
		if err != nil || !r.Truncated {
			return r, err
		}
	}
	return nil, fmt.Errorf("truncated over tcp")
}

func serveIn(t *testing.T, ns *netns.NS, addr string, h dns.Handler) {
	t.Helper()
	srv := &dnsserver.Server{Listen: []string{addr}, Handler: h}
	if err := ns.Do(func() error { return srv.Start(context.Background()) }); err != nil {
		t.Fatalf("serve %s: %v", addr, err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
}

// upstreamStub answers www.example.com and NXDOMAIN for anything else.
func upstreamStub() dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case strings.EqualFold(q.Name, "www.example.com.") && q.Qtype == dns.TypeA:
			rr, _ := dns.NewRR("www.example.com. 60 IN A 203.0.113.80")
			m.Answer = []dns.RR{rr}
		case strings.EqualFold(q.Name, "www.example.com.") && q.Qtype == dns.TypeAAAA:
			rr, _ := dns.NewRR("www.example.com. 60 IN AAAA 2001:db8::80")
			m.Answer = []dns.RR{rr}
		case strings.EqualFold(q.Name, "www.example.com."):
		default:
			m.Rcode = dns.RcodeNameError
			soa, _ := dns.NewRR(". 60 IN SOA a.root. b.root. 1 1 1 1 60")
			m.Ns = []dns.RR{soa}
		}
		w.WriteMsg(m)
	})
}

// stage is the cluster DNS and the node-local stage of one pass.
type stage struct {
	cluster dns.Handler
	local   *nodelocal.Handler
}

// newStage builds both over st with udpAnswerLimit limit (0: off).
func newStage(t *testing.T, ns *netns.NS, st *store.Store, hostSearches []string, limit int) stage {
	t.Helper()
	withAP, _ := clusterdns.WithAutopath(0, nil)
	cluster := clusterdns.NewHandler("cluster.local", st, clusterdns.WithForwarder(nsExchanger{ns, "192.0.2.53:53", false}), withAP,
		clusterdns.WithUDPAnswerLimit(limit))
	// The node-local stage asks the cluster DNS over TCP, as deployed.
	nl, err := nodelocal.New(nsExchanger{ns, "10.96.0.10:53", true}, nodelocal.Config{ClusterDomain: "cluster.local",
		HostSearches: func() []string { return hostSearches }, UDPAnswerLimit: limit,
		Cache: dnscache.Config{MaxTTL: time.Nanosecond, MaxNegativeTTL: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	return stage{cluster, nl}
}

// digTCP returns the addresses dig finds for name over TCP at server,
// from inside ns.
func digTCP(t *testing.T, ns *netns.NS, server, name string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := ns.Exec(ctx, "dig", "+tcp", "+short", "+tries=1", "@"+server, name, "A").CombinedOutput()
	if err != nil {
		t.Fatalf("dig +tcp @%s %s: %v: %s", server, name, err, out)
	}
	addrs, _ := stubresolver.Parse(out)
	return addrs
}

func TestAutopathQueryCount(t *testing.T) {
	ns := netns.New(t)
	for _, a := range []string{"10.96.0.10/32", "169.254.20.10/32", "192.0.2.53/32"} {
		ns.AddAddress(t, a)
	}
	// A non-loopback address of each family, so that getaddrinfo's
	// AI_ADDRCONFIG asks for both A and AAAA, as in a dual-stack pod.
	ns.IP(t, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	ns.IP(t, "link", "set", "eth1", "up")
	ns.IP(t, "addr", "add", "10.233.0.5/24", "dev", "eth0")
	ns.IP(t, "addr", "add", "fd00:233::5/64", "dev", "eth0", "nodad")
	ns.IP(t, "link", "set", "eth0", "up")
	if _, err := exec.LookPath("getent"); err != nil {
		t.Skip("needs getent (libc-bin)")
	}

	shop, err := os.ReadFile(manifests)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "objects.yaml"), append(shop, headless(bigHeadless)...), 0o644)
	objs, err := kubefeed.LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	st.Replace(objs)
	st.Publish()
	hostSearches := []string{"corp.example"}
	cluster := &counter{n: map[uint16]int{}}
	local := &counter{n: map[uint16]int{}}
	stub := &counter{n: map[uint16]int{}, h: upstreamStub()}
	serveIn(t, ns, "10.96.0.10:53", cluster)
	serveIn(t, ns, "169.254.20.10:53", local)
	serveIn(t, ns, "192.0.2.53:53", stub)

	// The pod's resolv.conf, rendered by the engine for a pod in "shop" on a
	// node whose resolv.conf has nameserver 192.0.2.53 and search corp.example.
	host := policy.Host{Nameservers: []string{"192.0.2.53"}, Searches: hostSearches}
	render := func(annotation string, nodeLocal bool) string {
		n := policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}
		if nodeLocal {
			n.NodeLocalDNS = []string{"169.254.20.10"}
		}
		e, _ := policy.New(n)
		r, err := e.Compute(policy.Input{Name: "client", Namespace: "shop", Policy: policy.ClusterFirst, PolicyAnnotation: annotation}, host)
		if err != nil {
			t.Fatal(err)
		}
		return resolvconf.Format(r.Config())
	}
	modes := []mode{
		{"ClusterFirst", render("", false), cluster},
		{"Autopath", render("ClusterFirstWithAutopath", false), cluster},
		{"Autopath+node-local", render("ClusterFirstWithAutopath", true), local},
	}
	res := stubresolver.New(t)
	var table []string
	for _, limit := range []int{0, answerLimit} {
		s := newStage(t, ns, st, hostSearches, limit)
		cluster.set(s.cluster)
		local.set(s.local)
		for _, r := range res {
			table = append(table, countLookups(t, ns, r, limit, modes, cluster, local)...)
		}
		if limit == 0 {
			continue
		}
		// TCP still gets every endpoint, from both stages and for the
		// autopath name.
		for _, q := range []struct{ server, name string }{
			{"10.96.0.10", "hl.shop.svc.cluster.local."},
			{"10.96.0.10", "hl.search.shop.cluster.local.ap.k8s.io."},
			{"169.254.20.10", "hl.search.shop.cluster.local.ap.k8s.io."},
		} {
			if got := digTCP(t, ns, q.server, q.name); !slices.Equal(got, headlessAddrs(bigHeadless)) {
				t.Errorf("dig +tcp @%s %s: %d addresses, want all %d", q.server, q.name, len(got), bigHeadless)
			}
		}
	}
	t.Logf("queries the pod sent per lookup (first hop):\n| udpAnswerLimit | resolver | lookup | ClusterFirst | Autopath | Autopath+node-local |\n|---|---|---|---|---|---|\n%s",
		strings.Join(table, "\n"))
	for _, m := range modes {
		t.Logf("%s resolv.conf:\n%s", m.name, m.conf)
	}
}

// mode is a column of the table: the pod's resolv.conf.
type mode struct {
	name  string
	conf  string
	first *counter // the server the pod talks to
}

// countLookups looks up each name with res in each mode and returns the
// table rows: the queries the pod sent to its first hop.
func countLookups(t *testing.T, ns *netns.NS, res stubresolver.Resolver, limit int, modes []mode, cluster, local *counter) []string {
	t.Helper()
	// big: an answer too big for UDP, for which autopath allows two
	// queries per address family (UDP, then TCP) instead of one.
	lookups := []struct {
		name, host string
		want       []string
		big        bool
	}{
		{"same-namespace short name", "web", []string{"10.96.1.1"}, false},
		{"<svc>.<other-ns>", "db.other", []string{"10.96.2.2"}, false},
		{"external name", "www.example.com", []string{"2001:db8::80", "203.0.113.80"}, false},
		{fmt.Sprintf("%d-endpoint headless", bigHeadless), "hl", headlessAddrs(bigHeadless), true},
	}
	var rows []string
	for _, lk := range lookups {
		row := fmt.Sprintf("| %d | %s | %s (`%s`) |", limit, res.Name, lk.name, lk.host)
		for _, m := range modes {
			ns.SetResolvConf(t, m.conf)
			cluster.take()
			local.take()
			got, err := res.Addrs(ns, lk.host)
			if err != nil {
				t.Fatalf("%s %s %s: %v\nresolv.conf:\n%s", res.Name, m.name, lk.host, err, m.conf)
			}
			switch {
			case lk.big && limit > 0:
				// A window of the endpoints, over UDP, for every resolver.
				if len(got) != limit || !subset(got, lk.want) {
					t.Errorf("%s %s %s: %d addresses %v, want %d of the endpoints", res.Name, m.name, lk.host, len(got), got, limit)
				}
			case lk.big && res.Name == "musl":
				// musl 1.2.3 never retries over TCP: what fits 512 bytes.
				if len(got) == 0 || !subset(got, lk.want) {
					t.Errorf("%s %s %s: addresses %v, want some of the endpoints", res.Name, m.name, lk.host, got)
				}
			case !slices.Equal(got, lk.want):
				t.Errorf("%s %s %s: addresses %v, want %v", res.Name, m.name, lk.host, got, lk.want)
			}
			sent, names := m.first.takeNames()
			if m.first == local {
				cluster.take()
			}
			total := 0
			for _, n := range sent {
				total += n
			}
			row += fmt.Sprintf(" %d (A %d, AAAA %d) |", total, sent[dns.TypeA], sent[dns.TypeAAAA])
			if lk.big && limit > 0 && (sent[dns.TypeA] != 1 || sent[dns.TypeAAAA] != 1) {
				// Issue 28: with the limit every resolver, glibc
				// included, resolves the big name in one query per
				// address family.
				t.Errorf("%s %s %s: the pod sent %v queries; with udpAnswerLimit %d one per address family", res.Name, m.name, lk.host, sent, limit)
			}
			if lk.big && limit == 0 && res.Name == "glibc" && total <= 4 {
				t.Errorf("%s %s %s: the pod sent %v queries; glibc's rounds for a big answer are gone without udpAnswerLimit?", res.Name, m.name, lk.host, sent)
			}
			if m.name == "ClusterFirst" {
				continue
			}
			// Autopath: one name, the first the search path gives.
			if names != 1 {
				t.Errorf("%s %s %s: the pod asked %d names; autopath answers the first", res.Name, m.name, lk.host, names)
			}
			// And one query per address family, or two (UDP, then TCP)
			// for an answer too big for UDP. glibc's getaddrinfo is the
			// exception for a big answer without udpAnswerLimit: when the
			// addresses overflow its buffer (1 KiB, doubled each time) it
			// asks everything again, so 120 addresses cost it 4 rounds of
			// A+AAAA over UDP and TCP (16 queries).
			perFamily := 1
			if lk.big && limit == 0 {
				perFamily = 2
			}
			if (!lk.big || limit > 0 || res.Name != "glibc") && (sent[dns.TypeA] > perFamily || sent[dns.TypeAAAA] > perFamily) {
				t.Errorf("%s %s %s: the pod sent %v queries; autopath allows %d per address family", res.Name, m.name, lk.host, sent, perFamily)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// subset reports whether every address of got is in all.
func subset(got, all []string) bool {
	for _, a := range got {
		if !slices.Contains(all, a) {
			return false
		}
	}
	return true
}
