package forward

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// UpstreamFunc is an UpstreamSource read from a function, such as the
// nameservers of a watched resolv.conf.
type UpstreamFunc func() []string

// Upstreams implements UpstreamSource.
func (f UpstreamFunc) Upstreams() []string { return f() }

// Start makes the Forwarder of cfg, registers its metrics on reg and
// starts its health and loop probes until ctx is done. The caller closes
// it.
func Start(ctx context.Context, cfg Config, reg prometheus.Registerer) (*Forwarder, error) {
	fwd, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(fwd); err != nil {
		_ = fwd.Close()
		return nil, fmt.Errorf("register forward metrics: %w", err)
	}
	fwd.Start(ctx)
	return fwd, nil
}
