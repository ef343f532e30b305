package dualstack

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// proc is a dnsconfigurer process running in a test namespace.
type proc struct {
	cmd    *exec.Cmd
	out    *testkit.Buffer
	exited chan struct{}
}

// start runs the built binary with args in ns. On cleanup it gets SIGTERM
// (SIGKILL after 15s); its output is logged when t failed.
func start(t *testing.T, ns *netns.NS, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: ns.Exec(context.Background(), buildbin.Dnsconfigurer(t), args...), out: &testkit.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// No Pdeathsig: it follows the forking thread, and ns.Do ends the
	// threads it uses, which may include that one.
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		buildbin.Terminate(p.cmd.Process, p.exited, 15*time.Second)
		if t.Failed() {
			t.Logf("dnsconfigurer %s output:\n%s", args[0], p.out.String())
		}
	})
	return p
}

// stop sends SIGTERM and wants a clean exit within 15s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if err := p.cmd.ProcessState; !err.Success() {
			t.Errorf("dnsconfigurer %s exit: %v", p.cmd.Args[len(p.cmd.Args)-1], err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15s after SIGTERM")
	}
}

// waitLog waits for re in the process's output.
func (p *proc) waitLog(t *testing.T, re string) {
	t.Helper()
	p.out.WaitMatch(t, 30*time.Second, regexp.MustCompile(re), p.exited)
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
