package forward_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// dot is a DNS-over-TLS upstream on loopback: its TCP port speaks TLS
// with a certificate of ca for 127.0.0.1, localhost and dns.test.
type dot struct {
	*testkit.Upstream
	handshakes atomic.Int32 // ClientHellos seen
}

// newDoT starts a DoT upstream answering with h; with clients set it
// requires a client certificate they sign.
func newDoT(t *testing.T, ca *testkit.CA, h dns.Handler, clients *x509.CertPool) *dot {
	t.Helper()
	certPEM, keyPEM, _ := ca.Serving(t, "dot", "dns.test")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	d := &dot{}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { d.handshakes.Add(1); return nil, nil }}
	if clients != nil {
		cfg.ClientCAs, cfg.ClientAuth = clients, tls.RequireAndVerifyClientCert
	}
	d.Upstream = testkit.NewUpstream(t, h, testkit.Tune(func(s *dns.Server) {
		if s.Listener != nil {
			s.Listener, s.Net = tls.NewListener(s.Listener, cfg), "tcp-tls"
		}
	}))
	return d
}

// url is the upstream as Config.Upstreams names it.
func (d *dot) url() string { return forward.TLSPrefix + d.Addr }

// writePEM writes the files of a client certificate and the CA into dir.
func writePEM(t *testing.T, dir string, ca *testkit.CA, c tls.Certificate) (caFile, certFile, keyFile string) {
	t.Helper()
	kder, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	testkit.WriteFile(t, caFile, string(ca.PEM))
	testkit.WriteFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})))
	testkit.WriteFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	return caFile, certFile, keyFile
}

func TestTLSUpstreamVerification(t *testing.T) {
	ca, other := testkit.NewCA(t), testkit.NewCA(t)
	up := newDoT(t, ca, answering, nil)
	tests := []struct {
		name    string
		tls     *tls.Config
		wantErr string
	}{
		{name: "the CA, the IP address verified", tls: &tls.Config{RootCAs: ca.Pool()}},
		{name: "the CA and the server name", tls: &tls.Config{RootCAs: ca.Pool(), ServerName: "dns.test"}},
		{name: "wrong server name", tls: &tls.Config{RootCAs: ca.Pool(), ServerName: "other.test"}, wantErr: "other.test"},
		{name: "wrong CA", tls: &tls.Config{RootCAs: other.Pool()}, wantErr: "unknown authority"},
		{name: "system roots", wantErr: "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.url()}, TLS: tt.tls, MaxFails: forward.NoHealthCheck})
			r, err := ask(f, context.Background(), "example.org.")
			if tt.wantErr == "" {
				if err != nil || len(r.Answer) != 1 {
					t.Fatalf("got %v, %v; want an answer", r, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, %v; want an error with %q", r, err, tt.wantErr)
			}
		})
	}
	if n := asked(up.Upstream); n != 2 {
		t.Errorf("upstream answered %d queries; want the 2 of verified connections", n)
	}
}

func TestTLSClientCertificate(t *testing.T) {
	ca := testkit.NewCA(t)
	up := newDoT(t, ca, answering, ca.Pool())
	caFile, certFile, keyFile := writePEM(t, t.TempDir(), ca, ca.Client(t, "client"))

	without, err := forward.LoadTLS(forward.TLSFiles{CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.url()}, TLS: without, MaxFails: forward.NoHealthCheck})
	if r, err := ask(f, context.Background(), "example.org."); err == nil {
		t.Fatalf("without a client certificate: got %v; want an error", r)
	}

	with, err := forward.LoadTLS(forward.TLSFiles{CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: "dns.test"})
	if err != nil {
		t.Fatal(err)
	}
	f = newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.url()}, TLS: with})
	if r, err := ask(f, context.Background(), "example.org."); err != nil || len(r.Answer) != 1 {
		t.Fatalf("with a client certificate: got %v, %v; want an answer", r, err)
	}
}

func TestLoadTLSErrors(t *testing.T) {
	ca := testkit.NewCA(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := writePEM(t, dir, ca, ca.Client(t, "client"))
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name  string
		files forward.TLSFiles
		want  string // the error's start: the field
	}{
		{name: "no CA file", files: forward.TLSFiles{CAFile: missing}, want: "caFile: "},
		{name: "CA file not PEM", files: forward.TLSFiles{CAFile: keyFile}, want: "caFile: "},
		{name: "no cert file", files: forward.TLSFiles{CertFile: missing, KeyFile: keyFile}, want: "certFile: "},
		{name: "no key file", files: forward.TLSFiles{CertFile: certFile, KeyFile: missing}, want: "keyFile: "},
		{name: "cert without key", files: forward.TLSFiles{CertFile: certFile}, want: "keyFile: "},
		{name: "key is not the cert's", files: forward.TLSFiles{CertFile: caFile, KeyFile: keyFile}, want: "certFile: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := forward.LoadTLS(tt.files)
			testkit.WantErrPrefix(t, err, tt.want)
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// TestTLSConnectionReuse: the queries of a route share one TLS connection
// (one handshake) until it has been idle for Expire.
func TestTLSConnectionReuse(t *testing.T) {
	ca := testkit.NewCA(t)
	up := newDoT(t, ca, answering, nil)
	const expire = 200 * time.Millisecond
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.url()}, TLS: &tls.Config{RootCAs: ca.Pool()},
		MaxFails: forward.NoHealthCheck, Expire: expire})
	for range 20 {
		if _, err := ask(f, context.Background(), "example.org."); err != nil {
			t.Fatal(err)
		}
	}
	if n := up.handshakes.Load(); n != 1 {
		t.Fatalf("20 queries made %d TLS handshakes; want 1", n)
	}
	m := testkit.Gather(t, testkit.Registry(t, f))
	for k, want := range map[string]float64{
		`dnsconfigurer_forward_conn_cache_hits_total{proto="tcp-tls",upstream="` + up.Addr + `",zone="."}`:   19,
		`dnsconfigurer_forward_conn_cache_misses_total{proto="tcp-tls",upstream="` + up.Addr + `",zone="."}`: 1,
	} {
		if m[k] != want {
			t.Errorf("%s = %v; want %v", k, m[k], want)
		}
	}
	// The idle time is what is under test: a pooled connection older than
	// Expire is not used.
	time.Sleep(expire + 50*time.Millisecond)
	if _, err := ask(f, context.Background(), "example.org."); err != nil {
		t.Fatal(err)
	}
	if n := up.handshakes.Load(); n != 2 {
		t.Fatalf("a query after Expire made %d handshakes in all; want 2 (a new connection)", n)
	}
}

// TestTLSTimeout: an upstream that does not answer, or does not even
// finish its handshake, fails the exchange within Timeout.
func TestTLSTimeout(t *testing.T) {
	ca := testkit.NewCA(t)
	silent := newDoT(t, ca, dns.HandlerFunc(func(dns.ResponseWriter, *dns.Msg) {}), nil)
	mute, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks TLS
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { mute.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		for {
			c, err := mute.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	for name, addr := range map[string]string{"no answer": silent.url(), "no handshake": forward.TLSPrefix + mute.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{addr}, TLS: &tls.Config{RootCAs: ca.Pool()},
				MaxFails: forward.NoHealthCheck, Timeout: timeout})
			start := time.Now()
			_, err := ask(f, context.Background(), "example.org.")
			if took := time.Since(start); err == nil || took > timeout+time.Second {
				t.Fatalf("got %v after %v; want an error within %v", err, took, timeout)
			}
		})
	}
}

// TestTLSProbes: the loop and health probes of a tls:// upstream go over
// TLS too.
func TestTLSProbes(t *testing.T) {
	ca := testkit.NewCA(t)
	up := newDoT(t, ca, answering, nil)
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.url()}, TLS: &tls.Config{RootCAs: ca.Pool()}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	testkit.WaitFor(t, 5*time.Second, func() error {
		for _, q := range up.Queries() {
			if strings.HasSuffix(q.Msg.Question[0].Name, ".loop-probe.dnsconfigurer.") && q.Net == "tcp" {
				return nil
			}
		}
		return errors.New("no loop probe over TLS yet")
	})
	if up.handshakes.Load() == 0 {
		t.Fatal("a probe reached the upstream without a TLS handshake")
	}
	if got := f.Upstreams(); len(got) != 1 || got[0] != up.Addr {
		t.Fatalf("Upstreams() = %q; want [%q], as CoreDNS names a tls:// upstream", got, up.Addr)
	}
}

func TestParseUpstream(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		tls     bool
		wantErr bool
	}{
		{in: "10.0.0.1", want: "10.0.0.1:53"},
		{in: "10.0.0.1:5353", want: "10.0.0.1:5353"},
		{in: "dns://10.0.0.1", wantErr: true},
		{in: "tls://1.1.1.1", want: "1.1.1.1:853", tls: true},
		{in: "tls://2.2.2.2:5353", want: "2.2.2.2:5353", tls: true},
		{in: "tls://[2606:4700::1111]", want: "[2606:4700::1111]:853", tls: true},
		{in: "tls://2606:4700::1111", want: "[2606:4700::1111]:853", tls: true},
		{in: "tls://[::1]:8853", want: "[::1]:8853", tls: true},
		{in: "tls://dns.example", wantErr: true},
		{in: "https://1.1.1.1", wantErr: true},
	}
	for _, tt := range tests {
		ap, isTLS, err := forward.ParseUpstream(tt.in)
		if (err != nil) != tt.wantErr || (err == nil && (ap.String() != tt.want || isTLS != tt.tls)) {
			t.Errorf("ParseUpstream(%q) = %v, %v, %v; want %s, %v", tt.in, ap, isTLS, err, tt.want, tt.tls)
		}
	}
}
