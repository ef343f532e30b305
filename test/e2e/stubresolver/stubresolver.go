// Package stubresolver runs real stub resolvers inside a test's network
// namespace, as an application in a pod calls them. They are glibc's
// getaddrinfo and getnameinfo (getent), musl's (test/e2e/testdata/lookup.c,
// linked statically with musl-gcc) and the pure Go resolver
// (test/e2e/images/testbin). Each reads the namespace's /etc/resolv.conf
// (netns.NS.SetResolvConf).
package stubresolver

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

// lookupBound bounds one lookup.
const lookupBound = 20 * time.Second

// Resolver is one stub resolver.
type Resolver struct {
	Name string // "glibc", "musl" or "go"
	TCP  bool   // honours "options use-vc" (musl asks over TCP only after a truncated reply)
	addr func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd
	ptr  func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd
}

// New builds the resolvers named, or all three when none is. glibc and
// musl are left out, with a log line, where getent or musl-gcc is
// missing; the Go resolver failing to build fails t.
func New(t testing.TB, names ...string) []Resolver {
	t.Helper()
	want := func(name string) bool { return len(names) == 0 || slices.Contains(names, name) }
	_, self, _, _ := runtime.Caller(0)
	src, dir := filepath.Dir(self), t.TempDir()
	var out []Resolver
	if want("glibc") {
		if _, err := exec.LookPath("getent"); err == nil {
			out = append(out, Resolver{Name: "glibc", TCP: true,
				addr: func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd {
					return ns.Exec(ctx, "getent", "ahosts", host)
				},
				ptr: func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd {
					return ns.Exec(ctx, "getent", "hosts", ip)
				}})
		} else {
			t.Log("no getent: glibc left out")
		}
	}
	if want("musl") {
		musl := filepath.Join(dir, "lookup-musl")
		if b, err := exec.Command("musl-gcc", "-static", "-O1", "-o", musl, filepath.Join(src, "..", "testdata", "lookup.c")).CombinedOutput(); err == nil {
			out = append(out, Resolver{Name: "musl",
				addr: func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd { return ns.Exec(ctx, musl, host) },
				ptr:  func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd { return ns.Exec(ctx, musl, "-x", ip) }})
		} else {
			t.Logf("no musl-gcc (musl-tools): musl left out: %v: %s", err, b)
		}
	}
	if want("go") {
		gobin := filepath.Join(dir, "testbin")
		build := exec.Command("go", "build", "-o", gobin, filepath.Join(src, "..", "images", "testbin"))
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build testbin: %v: %s", err, b)
		}
		out = append(out, Resolver{Name: "go", TCP: true,
			addr: func(ctx context.Context, ns *netns.NS, host string) *exec.Cmd {
				return ns.Exec(ctx, gobin, "lookup", host, "IP")
			},
			ptr: func(ctx context.Context, ns *netns.NS, ip string) *exec.Cmd {
				return ns.Exec(ctx, gobin, "lookup", ip, "PTR")
			}})
	}
	return out
}

// Addrs looks host up inside ns and returns its addresses, sorted and
// without duplicates.
func (r Resolver) Addrs(ns *netns.NS, host string) ([]string, error) {
	addrs, _, err := run(func(ctx context.Context) *exec.Cmd { return r.addr(ctx, ns, host) })
	return addrs, err
}

// Names looks the address ip up inside ns and returns its names (a
// trailing dot trimmed), sorted and without duplicates.
func (r Resolver) Names(ns *netns.NS, ip string) ([]string, error) {
	_, names, err := run(func(ctx context.Context) *exec.Cmd { return r.ptr(ctx, ns, ip) })
	return names, err
}

// run runs the command mk makes, within lookupBound, and splits the
// fields of its output into addresses and names.
func run(mk func(ctx context.Context) *exec.Cmd) (addrs, names []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupBound)
	defer cancel()
	out, err := mk(ctx).CombinedOutput()
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %s", err, out)
	}
	addrs, names = Parse(out)
	return addrs, names, nil
}

// Parse splits the fields of a lookup's output (getent's, lookup.c's,
// testbin's, dig +short's) into addresses and names (a trailing dot
// trimmed), each sorted and without duplicates.
func Parse(out []byte) (addrs, names []string) {
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
	return addrs, names
}
