package clusterdns

import (
	"context"
	"fmt"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
)

// Check builds what Run builds from cfg before it serves (the record
// store, the answer stack with its forwarders, cache, hosts and rewrites,
// the listener's and the feed's metrics) and stops it again. It reads no
// cluster, binds no port and sends no query. Its error is the one Run
// would have started with. The files cfg names are read as they are on
// this machine. `dnsconfigurer convert` checks its output with it.
func Check(ctx context.Context, cfg *v1alpha1.ServerConfiguration) error {
	s, err := New(cfg, Deps{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stack, err := buildStack(ctx, s.cfg, s.stores(), s.log, nil)
	if err != nil {
		return err
	}
	defer stack.stop()
	if _, err := kubefeed.NewSkips(s.reg, s.log, nil); err != nil {
		return err
	}
	if err := s.reg.Register(dnsserver.NewServer(s.cfg, s.log)); err != nil {
		return fmt.Errorf("register listener metrics: %w", err)
	}
	gather := &stackGatherer{main: s.reg}
	gather.cur.Store(stack)
	if _, err := gather.Gather(); err != nil {
		return fmt.Errorf("gather metrics: %w", err)
	}
	return nil
}
