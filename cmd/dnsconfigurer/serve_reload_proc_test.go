package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestServeReloadProcess runs `dnsconfigurer serve --config FILE` in a
// process of its own over the example manifests and edits the file as an
// operator would: a comment changes nothing and warns nothing; ttl, pods
// and namespaces are applied to the answers of the running server; a
// field that needs a restart is named in a warning and keeps its running
// value while the rest of the file is applied.
func TestServeReloadProcess(t *testing.T) {
	runChild()
	objects, err := filepath.Abs("../../examples/objects")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "server.yaml")
	write := func(body string) {
		t.Helper()
		testkit.WriteAtomic(t, path, body)
	}
	base := "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nobjects: " + objects + "\n"
	write(base + "ttl: 7\n")
	c := startChild(t, "TestServeReloadProcess", "serve", "--listen", "127.0.0.1:0", "--lameduck", "0s", "--config", path)
	m := addrRe.FindStringSubmatch(c.waitStderr(t, 30*time.Second, `msg="serving DNS"`))
	if m == nil {
		t.Fatalf("no address in the log:\n%s", c.stderr.String())
	}
	addr := m[1]
	// answer is the rcode and the TTL of the first answer record (0 with
	// none) of name's A query.
	answer := func(name string) (int, uint32) {
		t.Helper()
		r, err := testkit.Exchange("udp", addr, name, dns.TypeA)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(r.Answer) == 0 {
			return r.Rcode, 0
		}
		return r.Rcode, r.Answer[0].Header().Ttl
	}
	const (
		web      = "web.prod.svc.cluster.local."
		pod      = "10-1-0-1.prod.pod.cluster.local."
		apiSvc   = "kubernetes.default.svc.cluster.local."
		restart  = "config changes that need a restart are not applied"
		reloaded = `msg="config reloaded"`
	)
	reloads := 0
	// reload writes body and waits until the server has applied it.
	reload := func(body string) string {
		t.Helper()
		write(body)
		reloads++
		testkit.WaitFor(t, 15*time.Second, func() error {
			if out := c.stderr.String(); strings.Count(out, reloaded) < reloads {
				return fmt.Errorf("reload %d not applied:\n%s", reloads, out)
			}
			return nil
		})
		return c.stderr.String()
	}
	check := func(step, name string, rcode int, ttl uint32) {
		t.Helper()
		if gotRcode, gotTTL := answer(name); gotRcode != rcode || gotTTL != ttl {
			t.Errorf("%s: %s = %s TTL %d, want %s TTL %d", step, name, dns.RcodeToString[gotRcode], gotTTL, dns.RcodeToString[rcode], ttl)
		}
	}
	check("start", web, dns.RcodeSuccess, 7)
	check("start (pods disabled)", pod, dns.RcodeNameError, 0)

	if log := reload(base + "ttl: 7\n# a comment\n"); strings.Contains(log, restart) {
		t.Errorf("a comment-only change warned:\n%s", log)
	}
	check("comment", web, dns.RcodeSuccess, 7)

	reload(base + "ttl: 30\npods: verified\n")
	check("ttl 30", web, dns.RcodeSuccess, 30)
	check("pods verified", pod, dns.RcodeSuccess, 30)

	reload(base + "ttl: 30\npods: verified\nnamespaces: [default]\n")
	check("namespaces [default]", web, dns.RcodeNameError, 0)
	check("namespaces [default]", apiSvc, dns.RcodeSuccess, 30)

	log := reload(base + "ttl: 11\nclusterDomain: example.org\n")
	if !strings.Contains(log, "msg=\""+restart+"\" component=dnsserver fields=[clusterDomain]") {
		t.Errorf("a clusterDomain change: want a warning naming clusterDomain only:\n%s", log)
	}
	check("clusterDomain kept, ttl 11", web, dns.RcodeSuccess, 11)
	if n := strings.Count(log, restart); n != 1 {
		t.Errorf("%d restart warnings, want the clusterDomain change's only", n)
	}
}

// TestConfigHelpNamesRestartFields: --config's help (and docs/reference.md
// generated from it) lists every field a reload does not apply.
func TestConfigHelpNamesRestartFields(t *testing.T) {
	var help strings.Builder
	if _, err := parseServeFlags([]string{"-h"}, &help); err == nil {
		t.Fatal("-h: no ErrHelp")
	}
	_, text, _ := strings.Cut(help.String(), "\n  -config FILE")
	text, _, _ = strings.Cut(text, "\n  -")
	for _, f := range v1alpha1.RestartFields {
		if !strings.Contains(text, f) {
			t.Errorf("--config's help does not name %s:%s", f, text)
		}
	}
}
