package dualstack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	m, err := testkit.Scrape(c, "http://"+addr+"/metrics")
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

// resolver is a real stub resolver run as a program inside a namespace:
// addrs resolves a name to its addresses, ptr an address to its names.
type resolver struct {
	name string
	tcp  bool // honours "options use-vc"
	addr func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd
	ptr  func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd
}

// resolvers are glibc's getaddrinfo and getnameinfo (getent), musl's
// (test/e2e/testdata/lookup.c, static) and the pure Go resolver (testbin); those
// whose tool is missing are left out with a log line.
func resolvers(t *testing.T) []resolver {
	t.Helper()
	var out []resolver
	if _, err := exec.LookPath("getent"); err == nil {
		out = append(out, resolver{name: "glibc", tcp: true,
			addr: func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd {
				return ns.Exec(ctx, "getent", "ahosts", host)
			},
			ptr: func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd {
				return ns.Exec(ctx, "getent", "hosts", ip)
			}})
	} else {
		t.Log("no getent: glibc left out")
	}
	dir := t.TempDir()
	musl := filepath.Join(dir, "lookup-musl")
	if b, err := exec.Command("musl-gcc", "-static", "-O1", "-o", musl, "../testdata/lookup.c").CombinedOutput(); err == nil {
		out = append(out, resolver{name: "musl",
			addr: func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd { return ns.Exec(ctx, musl, host) },
			ptr:  func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd { return ns.Exec(ctx, musl, "-x", ip) }})
	} else {
		t.Logf("no musl-gcc (musl-tools): musl left out: %v: %s", err, b)
	}
	gobin := filepath.Join(dir, "testbin")
	build := exec.Command("go", "build", "-o", gobin, "../images/testbin")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testbin: %v: %s", err, b)
	}
	out = append(out, resolver{name: "go", tcp: true,
		addr: func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd {
			return ns.Exec(ctx, gobin, "lookup", host, "IP")
		},
		ptr: func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd {
			return ns.Exec(ctx, gobin, "lookup", ip, "PTR")
		}})
	return out
}

// run runs cmd with a 20s bound and returns its output's fields split
// into addresses and names (a trailing dot trimmed), each sorted and
// without duplicates.
func run(mk func(ctx context.Context) *exec.Cmd) (addrs, names []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := mk(ctx).CombinedOutput()
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %s", err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if a, err := netip.ParseAddr(f); err == nil {
			if s := a.String(); !slices.Contains(addrs, s) {
				addrs = append(addrs, s)
			}
		} else if f != "STREAM" && f != "DGRAM" && f != "RAW" {
			if s := strings.TrimSuffix(f, "."); !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
	}
	slices.Sort(addrs)
	slices.Sort(names)
	return addrs, names, nil
}
