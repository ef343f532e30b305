package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// webhookShape is a review of about webhookBodySize bytes whose object is
// shaped to make a decoder allocate, and the status it must get.
type webhookShape struct {
	name string
	body []byte
	want int
}

// shapedReview is a Pod CREATE review whose pod JSON has meta inside its
// metadata and spec inside its spec, with request extra inside the
// request, each the prefix followed by elem repeated up to about
// webhookBodySize bytes (elem's first copy without its leading comma).
func shapedReview(meta, spec, extra, prefix, elem, suffix string) []byte {
	var b strings.Builder
	b.Grow(webhookBodySize + 4096)
	b.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0b6a3f0e-shape",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"name":"web-0","namespace":"default","operation":"CREATE",`)
	fill := func() {
		b.WriteString(prefix)
		b.WriteString(strings.TrimPrefix(elem, ","))
		for b.Len() < webhookBodySize-len(suffix)-512 {
			b.WriteString(elem)
		}
		b.WriteString(suffix)
	}
	if extra != "" {
		fill()
		b.WriteString(",")
	}
	b.WriteString(`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"default"`)
	if meta != "" {
		b.WriteString(",")
		fill()
	}
	b.WriteString(`},"spec":{"containers":[{"name":"app","image":"registry.example/app:1.0"}]`)
	if spec != "" {
		b.WriteString(",")
		fill()
	}
	b.WriteString(`}}}}`)
	return []byte(b.String())
}

func webhookShapes(t *testing.T) []webhookShape {
	t.Helper()
	var ann strings.Builder
	for i := 0; ann.Len() < 250<<10; i++ {
		fmt.Fprintf(&ann, `,"a%d":""`, i)
	}
	// Annotations at the API server's limit, in small entries: a pod the
	// API server stores, so it is answered.
	atLimit := []byte(strings.Replace(string(shapedReview("", "", "", "", "", "")), `"namespace":"default"}`,
		`"namespace":"default","annotations":{`+strings.TrimPrefix(ann.String(), ",")+`}}`, 1))
	return []webhookShape{
		{"1.5M searches", shapedReview("", "x", "", `"dnsConfig":{"searches":[`, `,"a"`, `]}`), http.StatusBadRequest},
		{"1.5M nameservers", shapedReview("", "x", "", `"dnsConfig":{"nameservers":[`, `,"1"`, `]}`), http.StatusBadRequest},
		{"460k options", shapedReview("", "x", "", `"dnsConfig":{"options":[`, `,{"name":"a"}`, `]}`), http.StatusBadRequest},
		{"small annotations in bulk", shapedReview("x", "", "", `"annotations":{`, `,"a":""`, `}`), http.StatusBadRequest},
		{"a node selector in bulk", shapedReview("", "x", "", `"nodeSelector":{`, `,"k":"v"`, `}`), http.StatusBadRequest},
		{"1.5M userInfo groups", shapedReview("", "", "x", `"userInfo":{"username":"u","groups":[`, `,"g"`, `]}`), http.StatusOK},
		{"annotations at the API limit", atLimit, http.StatusOK},
	}
}

// TestWebhookProcessShapes (issue 55 row 2) sends the webhook process, at
// once, three copies of each of webhookShapes from clients of their own
// beside three ordinary large reviews: each shaped one gets its status (or
// 429 with Retry-After), the ordinary ones are admitted (or 429), and the
// process's peak RSS stays under the Deployment's 128 MiB. On 66f333f one
// review of 1.5M searches alone passed the limit.
func TestWebhookProcessShapes(t *testing.T) {
	cert, key, pool := webhookMemoryRun(t, "150 MB")
	shapes := append(webhookShapes(t), webhookShape{"ordinary large review", largeWebhookReview(t, webhookBodySize), http.StatusOK})
	c, addr := startWebhookProcess(t, cert, key, pool)
	base := procHWM(t, c.pid)
	const copies = 3
	answers := make([][copies]webhookAnswer, len(shapes))
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range shapes {
		for j := range copies {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: time.Minute}
			wg.Go(func() { answers[i][j] = postReview(client, "HTTP/1.1", "https://"+addr+"/validate", s.body) })
		}
	}
	wg.Wait()
	peak := procHWM(t, c.pid)
	for i, s := range shapes {
		for j, a := range answers[i] {
			ok := a.err == nil && (a.code == s.want || (a.code == http.StatusTooManyRequests && a.retryAfter != ""))
			if s.want == http.StatusOK && a.code == http.StatusOK && !a.allowed {
				ok = false
			}
			t.Logf("%s (%d bytes), copy %d: status %d allowed %v err %v", s.name, len(s.body), j, a.code, a.allowed, a.err)
			if !ok {
				t.Errorf("%s, copy %d: %+v; want %d (or 429 with Retry-After)", s.name, j, a, s.want)
			}
		}
	}
	t.Logf("%d shaped reviews answered in %v; webhook RSS: baseline %.1f MiB, peak %.1f MiB (VmHWM; limit %d MiB)",
		len(shapes)*copies, time.Since(start).Round(time.Millisecond), mib(base), mib(peak), webhookMemoryLimit>>20)
	if peak >= webhookMemoryLimit {
		t.Errorf("webhook peak RSS %.1f MiB, want under its %d MiB memory limit", mib(peak), webhookMemoryLimit>>20)
	}
	if took := c.terminate(t, 15*time.Second); c.waitErr != nil {
		t.Errorf("webhook exit %v after SIGTERM (%v)", c.waitErr, took.Round(time.Millisecond))
	}
}
