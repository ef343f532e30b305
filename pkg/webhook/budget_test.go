package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestByteBudget(t *testing.T) {
	b := newByteBudget(10)
	ctx := context.Background()
	if err := b.acquire(ctx, 6); err != nil {
		t.Fatal(err)
	}
	// A waiter that cannot fit yet, and a small one behind it that could:
	// the small one waits its turn (arrival order).
	bigDone := make(chan error, 1)
	go func() { bigDone <- b.acquire(ctx, 8) }()
	waitFor(t, "the large waiter queued", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiters.Len() == 1 })
	smallCtx, cancelSmall := context.WithCancel(ctx)
	smallDone := make(chan error, 1)
	go func() { smallDone <- b.acquire(smallCtx, 1) }()
	waitFor(t, "the small waiter queued", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiters.Len() == 2 })
	cancelSmall()
	if err := <-smallDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: err = %v", err)
	}
	b.release(6)
	if err := <-bigDone; err != nil {
		t.Fatal(err)
	}
	if got := b.inUse(); got != 8 {
		t.Fatalf("in use %d, want 8", got)
	}
	// A weight over the whole budget takes all of it rather than never
	// running.
	b.release(8)
	if err := b.acquire(ctx, 1<<30); err != nil || b.inUse() != 10 {
		t.Fatalf("oversized: err %v, in use %d", err, b.inUse())
	}
	b.release(1 << 30)
	if b.inUse() != 0 {
		t.Fatalf("in use %d after release", b.inUse())
	}
}

// largeReview is an AdmissionReview for a valid pod padded with an
// annotation to about size bytes.
func largeReview(t testing.TB, size int) []byte {
	t.Helper()
	small := len(podReview(t, pod("web-0")))
	return podReview(t, pod("web-0", func(p *corev1.Pod) {
		p.Annotations = map[string]string{"example.com/padding": strings.Repeat("x", size-small-40)}
	}))
}

// http1Client makes one connection per request in flight, as many API
// server replicas and goroutines would.
func http1Client(ts *testServer) *http.Client {
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ts.ca.pool(), MinVersion: tls.VersionTLS12},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConns:    100, MaxIdleConnsPerHost: 100,
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// h2Client is a client of its own connection speaking HTTP/2, as the API
// server and curl do.
func h2Client(ts *testServer) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ts.ca.pool(), MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// TestConcurrentLargeBodies: 50 parallel 6 MB reviews over HTTPS on
// loopback, over HTTP/1.1 and over HTTP/2 with a connection each, are all
// answered, and the heap stays bounded by the in-flight budget (and, for
// HTTP/2, by the 64 KiB receive buffers) instead of growing with their
// number.
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
	ts := startServer(t, testReviewer(t), WithTimeouts(2*time.Minute, 2*time.Minute))
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
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	growth := int64(peak) - int64(base)
	t.Logf("%d parallel %d-byte reviews in %v: peak HeapInuse %.1f MiB over an idle %.1f MiB",
		parallel, len(body), time.Since(start).Round(time.Millisecond), float64(growth)/(1<<20), float64(base)/(1<<20))
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i, code)
		}
	}
	if growth > maxHeap {
		t.Errorf("peak HeapInuse grew by %d MiB, want at most %d MiB", growth>>20, maxHeap>>20)
	}
	if n := ts.srv.h.budget.inUse(); n != 0 {
		t.Errorf("budget in use after all requests: %d", n)
	}
}

// TestInFlightBudgetFull: a body that cannot get its share of the budget in
// time is answered 429 with Retry-After, without its body read, while the
// budget holder and small reviews that fit go on.
func TestInFlightBudgetFull(t *testing.T) {
	const maxBytes = 1 << 20
	ts := startServer(t, testReviewer(t), WithMaxRequestBytes(maxBytes), WithMaxInFlightBytes(maxBytes+64<<10),
		WithTimeouts(2*time.Second, 10*time.Second))
	c := http1Client(ts)
	defer c.Transport.(*http.Transport).CloseIdleConnections()

	// The holder announces a large body and sends it only once released.
	held := largeReview(t, maxBytes-1000)
	pr, pw := io.Pipe()
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
	waitFor(t, "the holder's bytes taken", func() bool { return ts.srv.h.budget.inUse() == int64(len(held)) })

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

	go func() {
		pw.Write(held)
		pw.Close()
	}()
	if code := <-holder; code != http.StatusOK {
		t.Fatalf("holder: status %d", code)
	}
	if got := counterValue(ts.srv.m.requests.WithLabelValues(PathValidate, "429")); got != 1 {
		t.Errorf("requests_total{code=429} = %v, want 1", got)
	}
	waitFor(t, "the budget given back", func() bool { return ts.srv.h.budget.inUse() == 0 })
}
