// Package loopbackupstream runs the real `dnsconfigurer serve
// --upstream-resolv-conf FILE` (the binary built by test/buildbin, on the
// example manifests) on a node's resolver file whose nameserver is on
// loopback, as systemd-resolved's stub file is (issue 26 item 2). A
// resolv.conf carries no port, so serve asks its nameservers on port 53:
// the tests listen on port 53 and skip where they cannot (not root, or the
// port taken).
//
// A loopback neighbour of the listen address (127.0.0.53 beside
// 127.0.0.1:53) is another socket: serve keeps it and answers through it,
// and logs no "no usable upstream", loop or pods' loopback line. When the
// file's only nameserver is serve itself, the warning names that reason
// (the listen address it is, or the listen address on every address whose
// port it shares), not "every upstream is one of the listen addresses".
//
//	go test -count=1 -v ./test/integration/loopbackupstream/
package loopbackupstream

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

const objects = "../../../examples/objects"

// falseLines are log lines that must not appear when serve kept a
// loopback upstream that is not itself.
var falseLines = []string{
	"no usable upstream",
	"every upstream is one of the listen addresses",
	"would forward to itself",
	"not handed to pods",
	"forwarding loop",
}

// need53 skips t unless host's port 53 can be bound for UDP and TCP.
func need53(t *testing.T, host string) {
	t.Helper()
	addr := net.JoinHostPort(host, "53")
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Skipf("a resolv.conf nameserver is asked on port 53, which this test cannot bind on %s (root needed): %v", host, err)
	}
	pc.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot bind %s/tcp: %v", addr, err)
	}
	ln.Close()
}

// runStub is a DNS upstream on 127.0.0.53:53 (systemd-resolved's stub
// address) answering every A question with 192.0.2.53.
func runStub(t *testing.T) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, r *dns.Msg) {
		if q.Qtype == dns.TypeA {
			r.Answer = []dns.RR{testkit.A(q.Name, 30, "192.0.2.53")}
		}
	}), testkit.At("127.0.0.53:53"))
}

// asked reports whether up got a query for name (any case).
func asked(up *testkit.Upstream, name string) bool {
	for _, q := range up.Queries() {
		if strings.EqualFold(q.Msg.Question[0].Name, name) {
			return true
		}
	}
	return false
}

// writeResolvConf writes a node resolver file with nameservers, in
// systemd-resolved's stub file form.
func writeResolvConf(t *testing.T, nameservers ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).\n")
	for _, ns := range nameservers {
		b.WriteString("nameserver " + ns + "\n")
	}
	b.WriteString("options edns0 trust-ad\nsearch .\n")
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startServe runs `dnsconfigurer serve --upstream-resolv-conf file`
// listening on listen and returns its log once it serves DNS.
func startServe(t *testing.T, listen, file string) *testkit.Buffer {
	t.Helper()
	return buildbin.StartServeArgs(t, listen, "--objects", objects, "--upstream-resolv-conf", file).Output
}

// ask sends name A over network and returns the reply and how long it
// took.
func ask(t *testing.T, network, addr, name string) (*dns.Msg, time.Duration) {
	t.Helper()
	start := time.Now()
	r, err := testkit.Exchange(network, addr, name, dns.TypeA)
	if err != nil {
		t.Fatalf("%s %s to %s: %v", network, name, addr, err)
	}
	return r, time.Since(start)
}

// TestServeUpstreamResolvConfLoopbackNeighbour: serve listens on
// 127.0.0.1:53 and its --upstream-resolv-conf names systemd-resolved's
// 127.0.0.53 (alone, and after serve's own 127.0.0.1), where a stub
// answers. Outside names are answered through the stub over UDP and TCP,
// and serve logs none of falseLines.
func TestServeUpstreamResolvConfLoopbackNeighbour(t *testing.T) {
	buildbin.Dnsconfigurer(t) // built, or the test skipped, before the stub starts
	need53(t, "127.0.0.53")
	need53(t, "127.0.0.1")
	up := runStub(t)
	for _, tc := range []struct {
		name        string
		nameservers []string
	}{
		{"stub only", []string{"127.0.0.53"}},
		{"self then stub", []string{"127.0.0.1", "127.0.0.53"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := startServe(t, "127.0.0.1:53", writeResolvConf(t, tc.nameservers...))
			for _, network := range []string{"udp", "tcp"} {
				name := strings.ReplaceAll(tc.name, " ", "-") + "-" + network + ".example.org."
				r, _ := ask(t, network, "127.0.0.1:53", name)
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.53" {
					t.Errorf("%s %s: %v\nwant the stub's 192.0.2.53", network, name, r)
				}
				if !asked(up, name) {
					t.Errorf("%s %s: the stub on 127.0.0.53:53 was not asked", network, name)
				}
			}
			got := log.String()
			for _, bad := range falseLines {
				if strings.Contains(got, bad) {
					t.Errorf("serve logs %q for an upstream that is not itself:\n%s", bad, got)
				}
			}
		})
	}
}

// TestServeUpstreamResolvConfSelf: the file's only nameserver is serve
// itself, on its listen address or under a listen on every address. The
// warning names that reason, and outside names fail at once without being
// forwarded: SERVFAIL today (the forwarder's ErrNoUpstream), though the
// warning says "refused"; either rcode passes here, the figure is logged.
func TestServeUpstreamResolvConfSelf(t *testing.T) {
	buildbin.Dnsconfigurer(t)
	need53(t, "127.0.0.1")
	for _, tc := range []struct {
		name, listen, nameserver, want string
	}{
		{"own address", "127.0.0.1:53", "127.0.0.1",
			"127.0.0.1:53: it is the listen address 127.0.0.1:53: this server would forward to itself"},
		{"every address", ":53", "127.0.0.53",
			"127.0.0.53:53: the listen address 0.0.0.0:53 takes port 53 of every address, loopback included: this server would forward to itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.listen == ":53" {
				need53(t, "")
			}
			log := startServe(t, tc.listen, writeResolvConf(t, tc.nameserver))
			for _, network := range []string{"udp", "tcp"} {
				r, took := ask(t, network, "127.0.0.1:53", "outside-"+network+".example.org.")
				t.Logf("%s: %s after %v", network, dns.RcodeToString[r.Rcode], took.Round(time.Microsecond))
				if r.Rcode != dns.RcodeRefused && r.Rcode != dns.RcodeServerFailure || took > time.Second {
					t.Errorf("%s: %s after %v, want SERVFAIL or REFUSED at once without a usable upstream", network, dns.RcodeToString[r.Rcode], took)
				}
			}
			got := log.String()
			if !strings.Contains(got, "no usable upstream") || !strings.Contains(got, tc.want) {
				t.Errorf("log:\n%s\nwant \"no usable upstream\" with the reason %q", got, tc.want)
			}
			for _, bad := range []string{"every upstream is one of the listen addresses", "a repeat of an earlier upstream", "not handed to pods"} {
				if strings.Contains(got, bad) {
					t.Errorf("serve logs %q:\n%s", bad, got)
				}
			}
		})
	}
}
