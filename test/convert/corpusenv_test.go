package convert_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

// hostResolver is the nameserver of the /etc/resolv.conf both servers see
// in their namespaces (ip netns exec mounts it over the host's).
const hostResolver = "10.255.0.53"

// upstreamTarget is one address a configuration forwards to.
type upstreamTarget struct {
	addr netip.AddrPort
	n    int  // the fake's number: it answers A 192.0.2.<n>
	tls  bool // DNS over TLS (a tls:// target): served with dotCert
}

// dotCA is the test CA whose certificate the DNS-over-TLS fakes present;
// both servers trust it (SSL_CERT_FILE, or a forward's own "tls CAFILE"
// rewritten to it). The certificate is valid for every tls_servername of
// the corpus and every tls:// address.
type dotCA struct {
	ca     *testkit.CA
	pem    string
	config *tls.Config
}

var tlsServernameRe = regexp.MustCompile(`(?m)^\s*tls_servername\s+(\S+)`)

// newDoTCA makes the CA and one serving certificate for hosts (names and
// IP addresses).
func newDoTCA(t *testing.T, hosts []string) *dotCA {
	t.Helper()
	ca := testkit.NewCA(t)
	certPEM, keyPEM := ca.ServingFor(t, "corpus DoT upstream", hosts...)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &dotCA{ca: ca, pem: string(ca.PEM), config: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
}

// world is what one server of a side-by-side pair runs in: a network
// namespace with the configuration's own addresses (bind, health) on its
// loopback, a resolv.conf, and the API server's address forwarded to the
// host's API server. The fake upstreams, one on each address it forwards
// to (and the resolv.conf's nameserver), are in a second namespace behind
// a veth pair, so that a server on the wildcard address and port 53 does
// not collide with them; a loopback upstream stays in the first.
type world struct {
	ns *netns.NS
}

// newWorld builds a world. ips are the addresses the configuration names;
// targets the ones it forwards to; api the API server's host:port (on
// 127.0.0.1).
func newWorld(t *testing.T, ips []netip.Addr, targets []upstreamTarget, api string, dot *dotCA) *world {
	t.Helper()
	w := &world{ns: netns.New(t)}
	up := netns.New(t)
	w.ns.SetResolvConf(t, "nameserver "+hostResolver+"\n")
	suffix := w.ns.Name[len(w.ns.Name)-6:]
	if out, err := exec.Command("ip", "link", "add", "vw"+suffix, "netns", w.ns.Name, "type", "veth", "peer", "name", "vu"+suffix, "netns", up.Name).CombinedOutput(); err != nil {
		t.Fatalf("veth: %v: %s", err, out)
	}
	w.ns.IP(t, "addr", "add", "10.254.0.1/30", "dev", "vw"+suffix)
	w.ns.IP(t, "link", "set", "vw"+suffix, "up")
	up.IP(t, "addr", "add", "10.254.0.2/30", "dev", "vu"+suffix)
	up.IP(t, "link", "set", "vu"+suffix, "up")
	upstreamIPs := map[netip.Addr]bool{}
	for _, u := range targets {
		ip := u.addr.Addr()
		opts := []testkit.UpstreamOption{testkit.At(u.addr.String())}
		if u.tls {
			// DNS over TLS: the TCP listener speaks TLS with a
			// certificate from the test CA.
			opts = append(opts, testkit.Tune(func(s *dns.Server) {
				if s.Listener != nil {
					s.Net = "tcp-tls"
					s.Listener = tls.NewListener(s.Listener, dot.config)
				}
			}))
		}
		if ip.IsLoopback() {
			testkit.NewUpstream(t, fakeAnswers(u.n), append(opts, testkit.ListenIn(w.ns.Do))...)
			continue
		}
		if !upstreamIPs[ip] {
			upstreamIPs[ip] = true
			up.AddAddress(t, netip.PrefixFrom(ip, 32).String())
			w.ns.IP(t, "route", "add", netip.PrefixFrom(ip, 32).String(), "via", "10.254.0.2")
		}
		testkit.NewUpstream(t, fakeAnswers(u.n), append(opts, testkit.ListenIn(up.Do))...)
	}
	for _, ip := range ips {
		if !upstreamIPs[ip] {
			w.ns.AddAddress(t, netip.PrefixFrom(ip, ip.BitLen()).String())
		}
	}
	w.forward(t, api)
	return w
}

// fakeAnswers is upstream n: A 192.0.2.n, PTR extN.example., NXDOMAIN for
// names under nx., no data for other types, with TTL 7200, so that the
// caches' caps show. Each upstream answers apart, so that a name sent to
// another upstream shows.
func fakeAnswers(n int) dns.Handler {
	ip := fmt.Sprintf("192.0.2.%d", n)
	return testkit.Reply(func(q dns.Question, r *dns.Msg) {
		switch {
		case strings.HasPrefix(q.Name, "nx."):
			r.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			r.Answer = append(r.Answer, testkit.A(q.Name, 7200, ip))
		case q.Qtype == dns.TypePTR:
			r.Answer = append(r.Answer, &dns.PTR{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 7200},
				Ptr: fmt.Sprintf("ext%d.example.", n)})
		}
	})
}

// forward listens on addr inside the namespace and relays each connection
// to addr on the host, where the test's API server is.
func (w *world) forward(t *testing.T, addr string) {
	t.Helper()
	var l net.Listener
	if err := w.ns.Do(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen %s in the namespace: %v", addr, err)
	}
	testkit.Accept(t, l, func(in net.Conn) {
		out, err := net.Dial("tcp", addr)
		if err != nil {
			in.Close()
			return
		}
		testkit.Pipe(in, out)
	})
}

// ask sends q over UDP to addr inside the world's namespace and returns
// the rcode and the answer records, sorted, TTLs kept: each question is
// asked once, so a TTL is a cache's cap or the record's own.
func (w *world) ask(addr string, q question) (string, error) {
	var conn net.Conn
	if err := w.ns.Do(func() (err error) {
		conn, err = net.Dial("udp", addr)
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	c := &dns.Client{Net: "udp", Timeout: testkit.AskTimeout}
	r, _, err := c.ExchangeWithConn(testkit.NewQuery(q.name, q.qtype, 0), &dns.Conn{Conn: conn})
	if err != nil {
		return "", fmt.Errorf("%s %s at %s: %w", q.name, dns.TypeToString[q.qtype], addr, err)
	}
	var rrs []string
	for _, rr := range r.Answer {
		rrs = append(rrs, rr.String())
	}
	slices.Sort(rrs)
	return dns.RcodeToString[r.Rcode] + " [" + strings.Join(rrs, "; ") + "]", nil
}

var (
	ipRe      = regexp.MustCompile(`(?:^|[\s:/"(])((?:\d{1,3}\.){3}\d{1,3})(?::(\d+))?\b`)
	forwardRe = regexp.MustCompile(`(?m)^\s*(?:forward|proxy)\s+\S+\s+([^{#\n]*)`)
)

// addresses are the IPv4 addresses text names, to put on the loopback
// (none of 0.0.0.0, 127/8), and the IPv4 addresses it forwards to (port 53
// unless given; tls:// targets port 853 unless given, served over TLS),
// numbered by forward directive in order of appearance: the upstreams of
// one directive answer alike, since either server may pick any of them.
// IPv6 targets get no fake (the worlds have no IPv6 route): both servers
// find them unreachable alike.
func addresses(texts ...string) ([]netip.Addr, []upstreamTarget) {
	var ips []netip.Addr
	var targets []upstreamTarget
	add := func(ip netip.Addr) {
		if ip.IsUnspecified() || ip.IsLoopback() || slices.Contains(ips, ip) {
			return
		}
		ips = append(ips, ip)
	}
	group := 2
	cur := group // the number of the targets being added
	target := func(ap netip.AddrPort, overTLS bool) {
		if !ap.Addr().Is4() {
			return
		}
		for _, u := range targets {
			if u.addr == ap {
				return
			}
		}
		targets = append(targets, upstreamTarget{addr: ap, n: cur, tls: overTLS})
	}
	// A loopback target on a port the configuration serves itself (a
	// server block forwarding to another of its own) is no upstream.
	own := map[uint16]bool{}
	for _, text := range texts {
		for k := range ownPorts(text) {
			own[k] = true
		}
	}
	plain := target
	target = func(ap netip.AddrPort, overTLS bool) {
		if ap.Addr().IsLoopback() && own[ap.Port()] {
			return
		}
		plain(ap, overTLS)
	}
	resolver := netip.MustParseAddr(hostResolver)
	add(resolver)
	target(netip.AddrPortFrom(resolver, 53), false)
	for _, text := range texts {
		for _, m := range ipRe.FindAllStringSubmatch(text, -1) {
			if ip, err := netip.ParseAddr(m[1]); err == nil {
				add(ip)
			}
		}
		for _, m := range forwardRe.FindAllStringSubmatch(text, -1) {
			group++
			cur = group
			if slices.ContainsFunc(strings.Fields(m[1]), func(to string) bool { return strings.HasPrefix(to, "/") }) {
				// A resolv.conf path with addresses: CoreDNS picks among
				// its nameservers and the addresses alike, so they answer
				// as the resolv.conf's nameserver does.
				cur = 2
			}
			for _, to := range strings.Fields(m[1]) {
				to = strings.TrimPrefix(to, "dns://")
				port, overTLS := uint16(53), false
				if rest, ok := strings.CutPrefix(to, "tls://"); ok {
					to, port, overTLS = rest, 853, true
				}
				if ap, err := netip.ParseAddrPort(to); err == nil {
					target(ap, overTLS)
				} else if ip, err := netip.ParseAddr(strings.Trim(to, "[]")); err == nil {
					target(netip.AddrPortFrom(ip, port), overTLS)
				}
			}
		}
	}
	return ips, targets
}

// ownPorts are the ports of text's server block keys: the lines made only
// of ZONE:PORT words (".:5301 {", ".:53{").
func ownPorts(text string) map[uint16]bool {
	ports := map[uint16]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "{"))
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var found []uint16
		for _, w := range f {
			i := strings.LastIndexByte(w, ':')
			if i < 0 || strings.HasSuffix(w, ":") {
				found = nil
				break
			}
			var p uint16
			if _, err := fmt.Sscanf(w[i+1:], "%d", &p); err != nil || fmt.Sprint(p) != w[i+1:] {
				found = nil
				break
			}
			found = append(found, p)
		}
		for _, p := range found {
			ports[p] = true
		}
	}
	return ports
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
