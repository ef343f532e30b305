package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// budgetState is what became of an acquire call.
type budgetState string

const (
	granted  budgetState = "granted"
	queued   budgetState = "queued"
	refused  budgetState = "refused"  // errWaitersFull: waiters would hold over half
	tooLarge budgetState = "tooLarge" // more than the whole budget
)

// TestByteBudget: waiters are served in arrival order, a request over the
// budget is an error, and waiters may hold at most half the budget.
func TestByteBudget(t *testing.T) {
	type wait struct{ n, held int64 }
	cases := []struct {
		name    string
		size    int64
		used    int64  // taken before the waiters come
		waits   []wait // in arrival order
		want    []budgetState
		release int64 // then given back
		after   []budgetState
		inUse   int64 // at the end
	}{
		{name: "fits", size: 10, waits: []wait{{6, 0}}, want: []budgetState{granted}, after: []budgetState{granted}, inUse: 6},
		{name: "arrival order: a small one does not pass a large one", size: 10, used: 6,
			waits: []wait{{8, 0}, {1, 0}}, want: []budgetState{queued, queued},
			release: 6, after: []budgetState{granted, granted}, inUse: 9},
		{name: "granted in order as bytes come back", size: 10, used: 10,
			waits: []wait{{4, 0}, {4, 0}, {4, 0}}, want: []budgetState{queued, queued, queued},
			release: 8, after: []budgetState{granted, granted, queued}, inUse: 10},
		{name: "over the whole budget", size: 10, waits: []wait{{11, 0}}, want: []budgetState{tooLarge}, after: []budgetState{tooLarge}},
		{name: "waiters hold at most half", size: 10, used: 10,
			waits: []wait{{2, 3}, {2, 2}, {1, 1}}, want: []budgetState{queued, queued, refused},
			release: 4, after: []budgetState{granted, granted, refused}, inUse: 10},
		{name: "a waiter holding nothing may always wait", size: 10, used: 10,
			waits: []wait{{5, 5}, {1, 0}}, want: []budgetState{queued, queued},
			release: 6, after: []budgetState{granted, granted}, inUse: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newByteBudget(tc.size)
			if tc.used > 0 && !b.tryAcquire(tc.used) {
				t.Fatalf("tryAcquire(%d) of an empty budget of %d failed", tc.used, tc.size)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			results := make([]chan error, len(tc.waits))
			state := func(i int) budgetState {
				select {
				case err := <-results[i]:
					results[i] <- err // keep it for the next look
					switch {
					case err == nil:
						return granted
					case errors.Is(err, errWaitersFull):
						return refused
					case strings.Contains(err.Error(), "do not fit"):
						return tooLarge
					}
					t.Fatalf("waiter %d: %v", i, err)
				default:
				}
				return queued
			}
			for i, w := range tc.waits {
				results[i] = make(chan error, 1)
				before := b.waiterCount()
				go func() { results[i] <- b.acquire(ctx, w.n, w.held) }()
				testkit.WaitEqual(t, 10*time.Second, fmt.Sprintf("waiter %d to return or queue", i), func() bool {
					return len(results[i]) > 0 || b.waiterCount() > before
				}, true)
				if got := state(i); got != tc.want[i] {
					t.Errorf("waiter %d (%d bytes, holding %d): %s, want %s", i, w.n, w.held, got, tc.want[i])
				}
			}
			b.release(tc.release)
			for i := range tc.waits {
				if tc.after[i] == granted {
					testkit.WaitEqual(t, 10*time.Second, fmt.Sprintf("waiter %d granted", i), func() bool { return len(results[i]) > 0 }, true)
				}
			}
			for i := range tc.waits {
				if got := state(i); got != tc.after[i] {
					t.Errorf("after releasing %d: waiter %d: %s, want %s", tc.release, i, got, tc.after[i])
				}
			}
			if got := b.inUse(); got != tc.inUse {
				t.Errorf("in use %d, want %d", got, tc.inUse)
			}
		})
	}
}

// TestByteBudgetCancel: a waiter whose context ends leaves the line with
// its error; the bytes it held no longer count as waiting, and the waiter
// behind it, which fits, is granted.
func TestByteBudgetCancel(t *testing.T) {
	b := newByteBudget(10)
	b.tryAcquire(9)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- b.acquire(ctx, 5, 4) }()
	testkit.WaitEqual(t, 10*time.Second, "the first waiter queued", func() bool { return b.waiterCount() == 1 }, true)
	second := make(chan error, 1)
	go func() { second <- b.acquire(context.Background(), 1, 1) }()
	testkit.WaitEqual(t, 10*time.Second, "the second waiter queued", func() bool { return b.waiterCount() == 2 }, true)
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the waiter behind: %v", err)
	}
	b.mu.Lock()
	waitHeld := b.waitHeld
	b.mu.Unlock()
	if got := b.inUse(); got != 10 || waitHeld != 0 {
		t.Errorf("in use %d, held by waiters %d; want 10 and 0", got, waitHeld)
	}
}

// TestByteBudgetNoDeadlock: bodies that grow by doubling while holding what
// they have, more of them than the budget holds, all end: granted to the
// end or refused, never waiting for each other until their deadline. Without
// the waiters' half this deadlocks: each holds a share and waits for more.
func TestByteBudgetNoDeadlock(t *testing.T) {
	const (
		size   = 12 << 10
		target = 6 << 10 // each body's length: two fit at once
		bodies = 50
	)
	b := newByteBudget(size)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var done, refusedN atomic.Int64
	var wg sync.WaitGroup
	for range bodies {
		wg.Go(func() {
			var held int64
			defer func() { b.release(held) }()
			for held < target {
				n := min(target, max(2*held, minBodyBuffer)) - held
				err := b.acquire(ctx, n, held)
				if errors.Is(err, errWaitersFull) {
					refusedN.Add(1)
					return
				}
				if err != nil {
					t.Errorf("body holding %d waited for %d until: %v", held, n, err)
					return
				}
				held += n
				runtime.Gosched() // let the others interleave
			}
			done.Add(1)
		})
	}
	wg.Wait()
	t.Logf("%d bodies of %d bytes, budget %d: %d read to the end, %d refused", bodies, target, size, done.Load(), refusedN.Load())
	if done.Load() < 2 {
		t.Errorf("%d bodies read to the end, want at least 2 (the budget holds two)", done.Load())
	}
	if done.Load()+refusedN.Load() != bodies {
		t.Errorf("%d done and %d refused of %d", done.Load(), refusedN.Load(), bodies)
	}
	if got := b.inUse(); got != 0 {
		t.Errorf("in use %d at the end", got)
	}
}

// largeReview is an AdmissionReview for a valid pod padded to about size
// bytes with a container's environment variable (annotations are bounded
// by the API server's 256 KiB, and so by the webhook's decode).
func largeReview(t testing.TB, size int) []byte {
	t.Helper()
	small := len(podReview(t, pod("web-0")))
	return podReview(t, pod("web-0", func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "pad", Image: "registry.example/pad:1",
			Env: []corev1.EnvVar{{Name: "PADDING", Value: strings.Repeat("x", size-small-120)}}})
	}))
}

// http1Client makes one connection per request in flight, as many API
// server replicas and goroutines would.
func http1Client(ts *testServer) *http.Client {
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ts.ca.Pool(), MinVersion: tls.VersionTLS12},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConns:    100, MaxIdleConnsPerHost: 100,
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// h2Client is a client of its own connection speaking HTTP/2, as the API
// server and curl do.
func h2Client(ts *testServer) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ts.ca.Pool(), MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// TestConcurrentLargeBodies: 50 parallel 6 MB reviews over HTTPS on
// loopback, over HTTP/1.1 and over HTTP/2 with a connection each, are all
// answered, 200 or 429 (at least one gets 200: bodies take the budget as
// they arrive, so on a loaded machine partial bodies may share it and be
// refused while one finishes; byteBudget promises progress, not two at
// once), and
// the heap stays bounded by the in-flight budget (and, for HTTP/2, by the
// 64 KiB receive buffers) instead of growing with their number.
func TestConcurrentLargeBodies(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("sends 300 MB and measures the heap: run without -short and -race")
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) { concurrentLargeBodies(t, proto) })
	}
}

func concurrentLargeBodies(t *testing.T, proto string) {
	const (
		parallel = 50
		size     = 6_000_000
		maxHeap  = 100 << 20 // growth of HeapInuse over the idle server
	)
	// Timeouts out of the way: on a loaded machine the clients, in this
	// process, may stall for seconds; memory is what is measured here.
	ts := startServer(t, testReviewer(t), WithTimeouts(2*time.Minute, 2*time.Minute), WithBodyProgressTimeout(2*time.Minute))
	body := largeReview(t, size)
	clients := make([]*http.Client, parallel)
	for i := range clients {
		clients[i] = http1Client(ts)
		if proto == "HTTP/2.0" {
			clients[i] = h2Client(ts)
		}
		defer clients[i].Transport.(*http.Transport).CloseIdleConnections()
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	codes := make([]int, parallel)
	retry := make([]string, parallel)
	var wg sync.WaitGroup
	for i := range parallel {
		wg.Go(func() {
			resp, err := clients[i].Post(ts.url+PathValidate, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			if resp.Proto != proto {
				t.Errorf("request %d went over %s, want %s", i, resp.Proto, proto)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i], retry[i] = resp.StatusCode, resp.Header.Get("Retry-After")
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	growth := int64(peak) - int64(base)
	ok := 0
	for i, code := range codes {
		switch {
		case code == http.StatusOK:
			ok++
		case code == http.StatusTooManyRequests && retry[i] != "":
		default:
			t.Errorf("request %d: status %d (Retry-After %q), want 200, or 429 with Retry-After", i, code, retry[i])
		}
	}
	t.Logf("%d parallel %d-byte reviews in %v: %d × 200, the others 429; peak HeapInuse %.1f MiB over an idle %.1f MiB",
		parallel, len(body), time.Since(start).Round(time.Millisecond), ok, float64(growth)/(1<<20), float64(base)/(1<<20))
	if ok < 1 {
		t.Errorf("no review answered 200, want at least one (byteBudget's progress)")
	}
	if growth > maxHeap {
		t.Errorf("peak HeapInuse grew by %d MiB, want at most %d MiB", growth>>20, maxHeap>>20)
	}
	if n := ts.srv.h.budget.inUse(); n != 0 {
		t.Errorf("budget in use after all requests: %d", n)
	}
}

// TestInFlightBudgetFull: a body that cannot get budget for the bytes it
// receives within the queue time is answered 429 with Retry-After, while
// the holder of the budget and small reviews that fit go on.
func TestInFlightBudgetFull(t *testing.T) {
	const maxBytes = 1 << 20
	ts := startServer(t, testReviewer(t), WithMaxRequestBytes(maxBytes), WithMaxInFlightBytes(maxBytes+64<<10),
		WithTimeouts(6*time.Second, 10*time.Second), WithBodyProgressTimeout(6*time.Second))
	c := http1Client(ts)
	defer c.Transport.(*http.Transport).CloseIdleConnections()

	// The holder sends its large body but the last byte, and waits.
	held := largeReview(t, maxBytes-1000)
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequest(http.MethodPost, ts.url+PathValidate, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(held))
	req.Header.Set("Content-Type", "application/json")
	holder := make(chan int, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
			holder <- 0
			return
		}
		resp.Body.Close()
		holder <- resp.StatusCode
	}()
	go pw.Write(held[:len(held)-1])
	testkit.WaitEqual(t, 10*time.Second, "the holder's bytes taken", func() bool { return ts.srv.h.budget.inUse() == int64(len(held)) }, true)

	if code, _, body := post(t, c, ts.url, podReview(t, pod("small"))); code != http.StatusOK {
		t.Fatalf("small review while the budget is mostly taken: %d %s", code, body)
	}
	resp, err := c.Post(ts.url+PathValidate, "application/json", bytes.NewReader(largeReview(t, maxBytes/2)))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(msg), "in flight") {
		t.Fatalf("large review with the budget spent: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), msg)
	}

	if _, err := pw.Write(held[len(held)-1:]); err != nil {
		t.Fatal(err)
	}
	if code := <-holder; code != http.StatusOK {
		t.Fatalf("holder: status %d", code)
	}
	if got := testutil.ToFloat64(ts.srv.m.requests.WithLabelValues(PathValidate, "429")); got != 1 {
		t.Errorf("requests_total{code=429} = %v, want 1", got)
	}
	testkit.WaitEqual(t, 10*time.Second, "the budget given back", func() bool { return ts.srv.h.budget.inUse() == 0 }, true)
}

// slowRequest starts a POST /validate announcing declared bytes and sends
// first of them; the rest never comes. It returns the response, or the
// error, once the server answers.
func slowRequest(t *testing.T, c *http.Client, url string, declared int64, first []byte) <-chan *http.Response {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, url+PathValidate, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = declared
	req.Header.Set("Content-Type", "application/json")
	out := make(chan *http.Response, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := c.Do(req)
		if err != nil {
			out <- nil
			return
		}
		resp.Body.Close()
		out <- resp
	}()
	go pw.Write(first)
	t.Cleanup(func() {
		pw.Close()
		<-done
	})
	return out
}

// TestSlowBodyCutOff: a body that stops arriving is answered 408 once the
// body progress timeout passes, over HTTP/1.1 (and the connection closed)
// and HTTP/2, and its bytes go back to the budget.
func TestSlowBodyCutOff(t *testing.T) {
	const progress = 300 * time.Millisecond
	ts := startServer(t, testReviewer(t), WithBodyProgressTimeout(progress))
	cases := []struct {
		proto  string
		client func(*testServer) *http.Client
	}{
		{"HTTP/1.1", http1Client},
		{"HTTP/2.0", h2Client},
	}
	for i, tc := range cases {
		t.Run(tc.proto, func(t *testing.T) {
			c := tc.client(ts)
			defer c.Transport.(*http.Transport).CloseIdleConnections()
			start := time.Now()
			resp := <-slowRequest(t, c, ts.url, 1<<20, []byte(`{"apiVersion":`))
			took := time.Since(start)
			if resp == nil {
				t.Fatal("no response")
			}
			if resp.StatusCode != http.StatusRequestTimeout || resp.Proto != tc.proto {
				t.Fatalf("status %d over %s, want 408 over %s", resp.StatusCode, resp.Proto, tc.proto)
			}
			if took < progress || took > 5*time.Second {
				t.Errorf("answered after %v, want after the %v progress timeout and well before the 10s read timeout", took, progress)
			}
			if tc.proto == "HTTP/1.1" && !resp.Close {
				t.Errorf("HTTP/1.1 connection kept open after a slow body")
			}
			if got := testutil.ToFloat64(ts.srv.m.requests.WithLabelValues(PathValidate, "408")); got != float64(i+1) {
				t.Errorf("requests_total{code=408} = %v, want %d", got, i+1)
			}
			testkit.WaitEqual(t, 10*time.Second, "the budget given back", func() bool { return ts.srv.h.budget.inUse() == 0 }, true)
		})
	}
	if !strings.Contains(ts.logs.String(), "request body too slow") {
		t.Errorf("no log line for the slow bodies:\n%s", ts.logs.String())
	}
}

// TestSlowHoldersHoldLittle: 16 requests that announce 1 MiB each and send
// one byte hold 512 bytes of the budget each, not their announced length,
// so a review goes through at once with a budget of two such bodies.
func TestSlowHoldersHoldLittle(t *testing.T) {
	const (
		holders  = 16
		declared = 1 << 20
	)
	ts := startServer(t, testReviewer(t), WithMaxRequestBytes(declared), WithMaxInFlightBytes(2*declared),
		WithTimeouts(time.Minute, time.Minute), WithBodyProgressTimeout(time.Minute))
	c := http1Client(ts)
	defer c.Transport.(*http.Transport).CloseIdleConnections()
	for range holders {
		slowRequest(t, c, ts.url, declared, []byte("{"))
	}
	testkit.WaitEqual(t, 10*time.Second, "every holder in the handler", func() bool { return ts.srv.h.budget.inUse() == holders*minBodyBuffer }, true)
	start := time.Now()
	if code, _, body := post(t, c, ts.url, podReview(t, pod("web-0"))); code != http.StatusOK {
		t.Fatalf("review among the holders: %d %s", code, body)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("review among the holders took %v", took)
	}
	if got := ts.srv.h.budget.inUse(); got != holders*minBodyBuffer {
		t.Errorf("budget in use %d after the review, want the holders' %d", got, holders*minBodyBuffer)
	}
}

// TestClientCertificate: with a client CA, /validate answers only a client
// whose certificate it signed (403 otherwise, before the body is read), a
// certificate from another CA fails the handshake, and kubelet's probes
// need none.
func TestClientCertificate(t *testing.T) {
	clientCA, otherCA := testkit.NewCA(t), testkit.NewCA(t)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	testkit.WriteAtomic(t, caFile, string(clientCA.PEM))
	ts := startServer(t, testReviewer(t), WithClientCAFile(caFile))
	client := func(certs ...tls.Certificate) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.ca.Pool(), MinVersion: tls.VersionTLS12, Certificates: certs},
			ForceAttemptHTTP2: true}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	review := podReview(t, pod("web-0"))
	cases := []struct {
		name   string
		client *http.Client
		path   string
		code   int    // 0: the handshake fails
		reason string // in the body
	}{
		{"no certificate", client(), PathValidate, http.StatusForbidden, "a client certificate signed by the webhook's client CA is required"},
		{"no certificate, probe", client(), PathHealthz, http.StatusOK, ""},
		{"the client CA's certificate", client(clientCA.Client(t, "kube-apiserver-webhook-client")), PathValidate, http.StatusOK, `"allowed":true`},
		{"another CA's certificate", client(otherCA.Client(t, "kube-apiserver-webhook-client")), PathValidate, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			var err error
			if tc.path == PathValidate {
				resp, err = tc.client.Post(ts.url+tc.path, "application/json", bytes.NewReader(review))
			} else {
				resp, err = tc.client.Get(ts.url + tc.path)
			}
			if tc.code == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("status %d, want a failed handshake", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.reason) {
				t.Errorf("status %d %s, want %d with %q", resp.StatusCode, body, tc.code, tc.reason)
			}
		})
	}
	if got := testutil.ToFloat64(ts.srv.m.requests.WithLabelValues(PathValidate, "403")); got != 1 {
		t.Errorf("requests_total{code=403} = %v, want 1", got)
	}
}
