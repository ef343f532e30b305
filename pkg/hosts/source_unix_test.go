//go:build unix

package hosts

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSourceFIFO: a named pipe in the file's place is refused at once,
// without waiting for a writer.
func TestSourceFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// A blocked open would end with the context's error instead.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := NewSource(ctx, path, Config{})
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	st := s.Status()
	if !errors.Is(st.Err, ErrNotRegular) || !strings.Contains(st.Err.Error(), "a named pipe") {
		t.Fatalf("Err %v, want a named pipe refused", st.Err)
	}
	wantMetrics(t, s, map[string]float64{"dnsconfigurer_hosts_reload_errors_total{reason=not_regular}": 1})
}
