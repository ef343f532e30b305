package webhook

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// get fetches /healthz and reports the serial of the certificate the
// connection was set up with and whether the connection was reused.
func get(t *testing.T, c *http.Client, url string) (serial int64, reused bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+PathHealthz, nil)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("healthz: %d %+v", resp.StatusCode, resp.TLS)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), reused
}

// freshSerial is the serial a new connection sees.
func freshSerial(t *testing.T, ts *testServer) int64 {
	t.Helper()
	c := ts.client(t)
	c.Transport.(*http.Transport).DisableKeepAlives = true
	s, _ := get(t, c, ts.url)
	return s
}

// reloads is the server's cert_reloads_total for result ("ok", "error";
// "" for their sum).
func reloads(t *testing.T, ts *testServer, result string) float64 {
	t.Helper()
	const name = "dnsconfigurer_webhook_cert_reloads_total"
	m := testkit.Gather(t, ts.reg)
	if result == "" {
		return m.Sum(name)
	}
	return m[testkit.Key(name, "result", result)]
}

// TestCertRotation: a new pair is served to new connections, an open
// keep-alive connection goes on with the old one, and a bad pair is logged
// and leaves the last good one in use.
func TestCertRotation(t *testing.T) {
	ts := startServer(t, testReviewer(t))
	first := freshSerial(t, ts)

	// A keep-alive connection, and a request in flight across the
	// rotation: its body is half sent.
	kept := ts.client(t)
	if s, _ := get(t, kept, ts.url); s != first {
		t.Fatalf("serial %d, want %d", s, first)
	}
	body := podReview(t, pod("web-0"))
	pr, pw := io.Pipe()
	type result struct {
		code   int
		serial int64
		err    error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := ts.client(t).Post(ts.url+PathValidate, "application/json", pr)
		if err != nil {
			inflight <- result{err: err}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		inflight <- result{code: resp.StatusCode, serial: resp.TLS.PeerCertificates[0].SerialNumber.Int64()}
	}()
	if _, err := pw.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}

	// Rotate: key first, then certificate, both by rename.
	certPEM, keyPEM, second := issue(t, ts.ca)
	testkit.WriteAtomic(t, ts.keyFile, string(keyPEM))
	testkit.WriteAtomic(t, ts.certFile, string(certPEM))
	testkit.WaitEqual(t, 10*time.Second, "the new certificate on new connections", func() bool { return freshSerial(t, ts) == second }, true)
	if got := reloads(t, ts, "ok"); got < 1 {
		t.Errorf("cert_reloads_total{result=ok} = %v", got)
	}

	// The in-flight request completes on its connection.
	if _, err := pw.Write(body[len(body)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if r := <-inflight; r.err != nil || r.code != 200 || r.serial != first {
		t.Errorf("in-flight request: %+v, want 200 over the first certificate (%d)", r, first)
	}

	// The kept connection was not dropped: it is reused, with the old
	// certificate, and still answers reviews.
	s, reused := get(t, kept, ts.url)
	if !reused || s != first {
		t.Errorf("kept connection: reused=%v serial=%d, want reused with serial %d", reused, s, first)
	}
	code, review, raw := post(t, kept, ts.url, podReview(t, pod("web-0")))
	if code != 200 || !review.Response.Allowed {
		t.Errorf("review on the kept connection: %d %s", code, raw)
	}

	// A broken certificate file: logged, counted, the second pair stays.
	testkit.WriteAtomic(t, ts.certFile, "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
	testkit.WaitEqual(t, 10*time.Second, "the failed reload", func() bool { return reloads(t, ts, "error") >= 1 }, true)
	if s := freshSerial(t, ts); s != second {
		t.Errorf("after a broken certificate: serial %d, want %d", s, second)
	}
	if !strings.Contains(ts.logs.String(), "serving certificate not reloaded; keeping the previous one") {
		t.Errorf("the failed reload was not logged:\n%s", ts.logs.String())
	}

	// A certificate that does not match the key: the same.
	otherCert, _, _ := issue(t, ts.ca)
	before := reloads(t, ts, "error")
	testkit.WriteAtomic(t, ts.certFile, string(otherCert))
	testkit.WaitEqual(t, 10*time.Second, "the failed reload", func() bool { return reloads(t, ts, "error") > before }, true)
	if s := freshSerial(t, ts); s != second {
		t.Errorf("after a mismatched pair: serial %d, want %d", s, second)
	}

	// In place writes (no rename) of a good pair are seen too.
	certPEM, keyPEM, third := issue(t, ts.ca)
	if err := os.WriteFile(ts.keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ts.certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "the third certificate", func() bool { return freshSerial(t, ts) == third }, true)
	if s, reused := get(t, kept, ts.url); !reused || s != first {
		t.Errorf("kept connection after two rotations: reused=%v serial=%d", reused, s)
	}
}

// TestNewBadCert: the server does not start without a good pair.
func TestNewBadCert(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t)
	certPEM, _, _ := issue(t, ca)
	_, keyPEM, _ := issue(t, ca)
	cert, key := dir+"/tls.crt", dir+"/tls.key"
	testkit.WriteAtomic(t, cert, string(certPEM))
	testkit.WriteAtomic(t, key, string(keyPEM))
	for _, tc := range []struct{ name, cert, key, want string }{
		{"mismatch", cert, key, "private key does not match public key"},
		{"missing", dir + "/nope.crt", key, "read certificate"},
		{"empty names", "", "", "a certificate file and a key file are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(testReviewer(t), tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	notPEM := dir + "/ca.txt"
	testkit.WriteAtomic(t, notPEM, "not a certificate\n")
	for _, tc := range []struct{ name, caFile, want string }{
		{"client CA missing", dir + "/nope-ca.crt", "webhook: client CA: open " + dir + "/nope-ca.crt"},
		{"client CA not PEM", notPEM, "webhook: client CA " + notPEM + ": no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, _ := issue(t, ca)
			testkit.WriteAtomic(t, cert, string(certPEM))
			testkit.WriteAtomic(t, key, string(keyPEM))
			_, err := New(testReviewer(t), cert, key, WithClientCAFile(tc.caFile))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(&Reviewer{}, cert, key); err == nil {
		t.Errorf("New without an engine: no error")
	}
}

// TestCertReloadUnrelatedChange: other files changing in the directory cause
// no reload.
func TestCertReloadUnrelatedChange(t *testing.T) {
	ts := startServer(t, testReviewer(t))
	// Touch the directory with an unrelated file: no reload is counted.
	if err := os.WriteFile(ts.certFile+".unrelated", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Several debounce periods (10 ms) without a reload.
	testkit.Holds(t, 100*time.Millisecond, func() error {
		if got := reloads(t, ts, ""); got != 0 {
			return fmt.Errorf("reloads after an unrelated change: %v", got)
		}
		return nil
	})
}
