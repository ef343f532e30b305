package nriplugin

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineCounter counts log lines holding a string and signals when it has
// seen enough.
type lineCounter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	substr string
	want   int
	seen   int
	done   chan struct{}
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if strings.Contains(string(p), l.substr) {
		l.seen++
		if l.seen == l.want {
			close(l.done)
		}
	}
	return len(p), nil
}

// TestRunRetries checks that Run keeps registering while the runtime's
// socket is missing and returns nil once its context is done.
func TestRunRetries(t *testing.T) {
	lc := &lineCounter{substr: "registering again", want: 3, done: make(chan struct{})}
	p := newPlugin(t, WithSocket(filepath.Join(t.TempDir(), "missing.sock")), WithBackoff(time.Millisecond, 4*time.Millisecond))
	p.log = slog.New(slog.NewTextHandler(lc, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ret := make(chan error, 1)
	go func() { ret <- p.Run(ctx) }()
	select {
	case <-lc.done:
	case err := <-ret:
		t.Fatalf("Run returned %v before retrying", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("no retries in 10s; log:\n%s", lc.buf.String())
	}
	if p.Connected() {
		t.Error("Connected() = true without a runtime")
	}
	cancel()
	select {
	case err := <-ret:
		if err != nil {
			t.Errorf("Run = %v after cancel, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}
}
