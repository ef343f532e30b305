package health

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "health_test_total", Help: "x"})
	reg.MustRegister(c)
	c.Inc()
	synced := false
	h := Handler(reg, Condition(func() bool { return true }, "runtime not connected"), Condition(func() bool { return synced }, "not synced"))
	noMetrics := Handler(nil)
	tests := []struct {
		name   string
		h      http.Handler
		method string
		path   string
		code   int
		body   string
	}{
		{"healthz", h, "GET", "/healthz", 200, "ok\n"},
		{"readyz names the failing check", h, "GET", "/readyz", 503, "not synced\n"},
		{"metrics", h, "GET", "/metrics", 200, "health_test_total 1"},
		{"HEAD works like GET", h, "HEAD", "/healthz", 200, ""},
		{"POST is not allowed", h, "POST", "/healthz", 405, ""},
		{"other paths are 404", h, "GET", "/validate", 404, ""},
		{"no registry: no /metrics", noMetrics, "GET", "/metrics", 404, ""},
		{"no checks: ready", noMetrics, "GET", "/readyz", 200, "ok\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("%s %s = %d %q, want %d containing %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
		})
	}
	synced = true
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Errorf("/readyz once synced = %d", rec.Code)
	}
}

func TestServerRunAndShutdown(t *testing.T) {
	if _, err := Listen("256.0.0.1:0", Handler(nil), nil); err == nil || !strings.Contains(err.Error(), `"256.0.0.1:0"`) {
		t.Fatalf("bad address: %v", err)
	}
	s, err := Listen("127.0.0.1:0", Handler(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok\n" {
		t.Fatalf("/healthz = %q", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if _, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Fatal("still serving after Run returned")
	}
}
