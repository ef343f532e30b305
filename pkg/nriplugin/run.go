package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/containerd/nri/pkg/stub"
)

// errClosed is a connection the runtime closed.
var errClosed = errors.New("nriplugin: connection to the runtime closed")

// Run registers the plugin on the runtime's NRI socket and serves it until
// ctx is done (nil). When the runtime closes the connection or cannot be
// reached, it registers again after a backoff that doubles from the
// minimum to the maximum and starts over after each registration. Only a
// stub that cannot be built (a bad name or index) ends it with an error.
func (p *Plugin) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.followHost(ctx) }()
	defer wg.Wait()
	defer cancel()
	wait := p.minBackoff
	for {
		registered, err := p.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var buildErr *stubError
		if errors.As(err, &buildErr) {
			return err
		}
		if registered {
			wait = p.minBackoff
		}
		p.log.Warn("not connected to the runtime; registering again", "socket", p.socket, "in", wait.String(), "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, p.maxBackoff)
	}
}

// stubError is an NRI stub that cannot be built.
type stubError struct{ err error }

func (e *stubError) Error() string { return fmt.Sprintf("nriplugin: %v", e.err) }
func (e *stubError) Unwrap() error { return e.err }

// serve registers once and serves until the connection closes or ctx is
// done. registered reports that the runtime configured the plugin.
func (p *Plugin) serve(ctx context.Context) (registered bool, err error) {
	closed := make(chan struct{})
	var once sync.Once
	st, err := stub.New(p, stub.WithPluginName(p.name), stub.WithPluginIdx(p.index), stub.WithSocketPath(p.socket),
		stub.WithOnClose(func() { once.Do(func() { close(closed) }) }), stub.WithLogger(logAdapter{p.log}))
	if err != nil {
		return false, &stubError{err}
	}
	if err := st.Start(ctx); err != nil {
		st.Stop()
		return false, err
	}
	p.connected.Store(true)
	p.m.connected.Set(1)
	defer func() { p.connected.Store(false); p.m.connected.Set(0) }()
	select {
	case <-closed:
		return true, errClosed
	case <-ctx.Done():
		st.Stop()
		return true, nil
	}
}

// logAdapter routes the stub's log lines to the plugin's logger, one
// level lower than the stub's own (it logs routine steps at info).
type logAdapter struct{ log *slog.Logger }

var _ nrilog.Logger = logAdapter{}

func (l logAdapter) Debugf(ctx context.Context, format string, args ...any) {
	l.log.Log(ctx, slog.LevelDebug, fmt.Sprintf(format, args...), "source", "nri-stub")
}

func (l logAdapter) Infof(ctx context.Context, format string, args ...any) {
	l.log.Log(ctx, slog.LevelDebug, fmt.Sprintf(format, args...), "source", "nri-stub")
}

func (l logAdapter) Warnf(ctx context.Context, format string, args ...any) {
	l.log.Log(ctx, slog.LevelWarn, fmt.Sprintf(format, args...), "source", "nri-stub")
}

func (l logAdapter) Errorf(ctx context.Context, format string, args ...any) {
	l.log.Log(ctx, slog.LevelError, fmt.Sprintf(format, args...), "source", "nri-stub")
}
