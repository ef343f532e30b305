package apiserver

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// NewClient returns a clientset for cfg with an HTTP transport of its own
// whose connections are all closed when the test ends, so that a goroutine
// check sees none left behind. (client-go shares cached transports between
// clients, and they outlive the test; a Dial of our own opts out of that,
// and closing every connection, not only the idle ones, cannot race with the
// end of a cancelled watch stream.)
func NewClient(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	conns := &connTracker{}
	cfg.Dial = conns.dial
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("http client: %v", err)
	}
	client, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	t.Cleanup(func() {
		utilnet.CloseIdleConnectionsFor(hc.Transport)
		conns.closeAll()
	})
	return client
}

// connTracker dials and remembers the connections.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *connTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.mu.Unlock()
	return conn, nil
}

func (c *connTracker) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}
