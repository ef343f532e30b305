package clusterdns

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// dotUpstream is a DNS-over-TLS upstream on loopback answering every
// question with 192.0.2.8, with a certificate of ca for 127.0.0.1 and
// dns.test.
func dotUpstream(t *testing.T, ca *testkit.CA) string {
	t.Helper()
	certPEM, keyPEM, _ := ca.Serving(t, "dot", "dns.test")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, r *dns.Msg) {
		r.Answer = []dns.RR{testkit.A(q.Name, 30, "192.0.2.8")}
	}), testkit.Tune(func(s *dns.Server) {
		if s.Listener != nil {
			s.Listener, s.Net = tls.NewListener(s.Listener, cfg), "tcp-tls"
		}
	})).Addr
}

// TestStackTLSUpstream: a route to a DoT upstream, as serve builds it from
// its configuration (CA file, server name), answers a client's UDP query.
func TestStackTLSUpstream(t *testing.T) {
	ca := testkit.NewCA(t)
	up := dotUpstream(t, ca)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	testkit.WriteFile(t, caFile, string(ca.PEM))
	cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.1:0"}, Objects: "x",
		Forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{"tls://" + up},
			TLS: &v1alpha1.ForwardTLS{ServerName: "dns.test", CAFile: caFile}}}}
	stack, err := buildStack(context.Background(), cfg, stores{cluster: emptyStore(t, cfg)}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.stop)
	addr := testkit.StartServer(t, &dnsserver.Server{Listen: cfg.Listen, Handler: stack.handler})
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	r, err := dns.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.8" {
		t.Fatalf("got %v; want www.example.org. A 192.0.2.8 from the DoT upstream", r)
	}
}

// TestStackTLSFiles: a TLS file that cannot be read fails the start with
// the field that names it.
func TestStackTLSFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		tls  v1alpha1.ForwardTLS
		want string
	}{
		{v1alpha1.ForwardTLS{CAFile: missing}, "forward[0].tls.caFile: open " + missing},
		{v1alpha1.ForwardTLS{CertFile: missing, KeyFile: missing}, "forward[0].tls.certFile: stat " + missing},
	} {
		cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.1:0"}, Objects: "x",
			Forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{"tls://127.0.0.7"}, TLS: &tc.tls}}}
		_, err := buildStack(context.Background(), cfg, stores{cluster: emptyStore(t, cfg)}, slog.New(slog.DiscardHandler), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v; want an error with %q", err, tc.want)
		}
	}
}

// TestStackResolvConfWithAddresses: a route's resolv.conf path among
// addresses stands for the file's nameservers, in its place, as CoreDNS
// lists them; the file is watched.
func TestStackResolvConfWithAddresses(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	testkit.WriteFile(t, resolv, "nameserver 127.0.0.7\n")
	cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.2:0"}, Objects: "x",
		Forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{"127.0.0.5", resolv, "tls://127.0.0.9"}}}}
	stack, err := buildStack(context.Background(), cfg, stores{cluster: emptyStore(t, cfg)}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.stop)
	upstreams := func() string {
		var got []string
		for _, u := range []string{"127.0.0.5:53", "127.0.0.7:53", "127.0.0.8:53", "127.0.0.9:853"} {
			key := testkit.Key("dnsconfigurer_forward_upstream_healthy", "zone", ".", "upstream", u)
			if _, ok := testkit.Gather(t, stack.gatherers())[key]; ok {
				got = append(got, u)
			}
		}
		return strings.Join(got, " ")
	}
	if got, want := upstreams(), "127.0.0.5:53 127.0.0.7:53 127.0.0.9:853"; got != want {
		t.Fatalf("upstreams %q; want %q", got, want)
	}
	testkit.WriteAtomic(t, resolv, "nameserver 127.0.0.8\n")
	testkit.WaitFor(t, 10*time.Second, func() error {
		if got, want := upstreams(), "127.0.0.5:53 127.0.0.8:53 127.0.0.9:853"; got != want {
			return errors.New("upstreams " + got)
		}
		return nil
	})
}
