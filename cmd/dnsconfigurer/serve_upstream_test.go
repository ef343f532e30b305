package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestServeForwardFlag: a malformed --forward is a usage error naming the
// flag and what is wrong.
func TestServeForwardFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		want  string
	}{
		{"no equals", "corp.example", `want ZONE=ADDR`},
		{"no upstream", "corp.example=", `want ZONE=ADDR`},
		{"no zone", "=10.0.0.53", `want ZONE=ADDR`},
		{"bad zone", "corp..example=10.0.0.53", `zone "corp..example" is not a domain name`},
		{"host name", "corp.example=dns.google", `upstream "dns.google" is not an address`},
		{"bad port", "corp.example=10.0.0.53:99999", `upstream "10.0.0.53:99999" is not an address`},
		{"second upstream", ".=10.0.0.53,10.0.0.x", `upstream "10.0.0.x" is not an address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr testkit.Buffer
			code := runServe(context.Background(), []string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--forward", tc.value}, nil, io.Discard, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), "-forward") || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming -forward and %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}

// TestServeNoUsableUpstream starts serve with upstreams its forwarder takes
// for the server itself and checks the warning names the real reason of
// each, not "every upstream is one of the listen addresses" (forward's
// TestSelfReason has the rule's other cases).
func TestServeNoUsableUpstream(t *testing.T) {
	// Free for UDP and TCP: serve binds both (a port probed over UDP alone
	// was sometimes another test's TCP connection).
	_, port, err := net.SplitHostPort(testkit.FreeAddr(t, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, listen, upstream, want string
	}{
		{"own address", "127.0.0.1:" + port, "127.0.0.1:" + port,
			"127.0.0.1:" + port + ": it is the listen address 127.0.0.1:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, log := startServeLog(t, "--listen", tc.listen, "--objects", "../../examples/objects", "--upstream", tc.upstream)
			testkit.WaitFor(t, 10*time.Second, func() error {
				if !strings.Contains(log.String(), "no usable upstream") {
					return fmt.Errorf("no warning: %s", log.String())
				}
				return nil
			})
			got := log.String()
			if !strings.Contains(got, tc.want) || strings.Contains(got, "every upstream is one of the listen addresses") {
				t.Errorf("log %s\nwant the reason %q", got, tc.want)
			}
		})
	}
}

// TestServeUpstreamResolvConfRelative takes --upstream-resolv-conf as a
// path, relative ones included (a route names a file by an absolute path).
func TestServeUpstreamResolvConfRelative(t *testing.T) {
	f, err := parseServeFlags([]string{"--listen", "127.0.0.1:0", "--objects", "../../examples/objects", "--upstream-resolv-conf", "testdata/node-resolv.conf"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.serverConfig()
	if err != nil {
		t.Fatalf("relative --upstream-resolv-conf: %v", err)
	}
	if got := cfg.Forward[0].ResolvConf(); !filepath.IsAbs(got) || !strings.HasSuffix(got, "testdata/node-resolv.conf") {
		t.Errorf("route file = %q, want testdata/node-resolv.conf made absolute", got)
	}
}
