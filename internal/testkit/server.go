package testkit

import (
	"context"
	"testing"
	"time"
)

// DNSServer is what StartServer starts: a dnsserver.Server.
type DNSServer interface {
	Start(context.Context) error
	Shutdown(context.Context) error
	Addrs() []string
}

// StartServer starts srv and returns its first address. When t ends it
// shuts srv down, and fails t when that fails or takes over 10 s.
func StartServer(t testing.TB, srv DNSServer) string {
	t.Helper()
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv.Addrs()[0]
}
