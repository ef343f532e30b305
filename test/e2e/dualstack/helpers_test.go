package dualstack

import (
	"context"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// start runs the built binary with args in ns. On cleanup it gets SIGTERM
// (SIGKILL after 15s); its output is logged when t failed. It has no
// Pdeathsig: that follows the forking thread, and ns.Do ends the threads
// it uses, which may include that one.
func start(t *testing.T, ns *netns.NS, args ...string) *buildbin.Proc {
	t.Helper()
	return buildbin.StartCommand(t, args[0], ns.Exec(context.Background(), buildbin.Dnsconfigurer(t), args...), 15*time.Second)
}

// waitLog waits for re in p's output.
func waitLog(t *testing.T, p *buildbin.Proc, re string) {
	t.Helper()
	p.Output.WaitMatch(t, 30*time.Second, regexp.MustCompile(re), p.Exited())
}

// metrics scrapes http://addr/metrics from inside ns.
func metrics(t *testing.T, ns *netns.NS, addr string) testkit.Metrics {
	t.Helper()
	m, err := testkit.Scrape(testkit.NetNSClient(ns.Path), "http://"+addr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ask sends one query from inside ns to server (ip, port 53) over network
// ("udp" or "tcp"), from the address src when it is valid.
func ask(t *testing.T, ns *netns.NS, network, server string, src netip.Addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: network, Timeout: 3 * time.Second}
	if src.IsValid() {
		if network == "tcp" {
			c.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		} else {
			c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: src.AsSlice()}}
		}
	}
	var r *dns.Msg
	err := ns.Do(func() (err error) {
		r, _, err = c.Exchange(m, net.JoinHostPort(server, "53"))
		return err
	})
	if err != nil {
		t.Fatalf("%s %s %s from %v to %s: %v", network, name, dns.TypeToString[qtype], src, server, err)
	}
	return r
}

// rrs are a reply section's records as text, TTLs zeroed, sorted.
func rrs(section []dns.RR) []string {
	var out []string
	for _, rr := range section {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		c := dns.Copy(rr)
		c.Header().Ttl = 0
		out = append(out, strings.ReplaceAll(c.String(), "\t", " "))
	}
	slices.Sort(out)
	return out
}
