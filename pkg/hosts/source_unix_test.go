//go:build unix

package hosts

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestSourceFIFO: a named pipe in the file's place is refused at once,
// without waiting for a writer.
func TestSourceFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	testkit.FIFO(t, path)
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
	wantMetrics(t, s, map[string]float64{testkit.Key("dnsconfigurer_hosts_reload_errors_total", "reason", "not_regular"): 1})
}
