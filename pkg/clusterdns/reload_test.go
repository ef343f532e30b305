package clusterdns

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestReloaderBaseline: the reloader applies the config file when its
// content is not the one Run started with, including an edit made before
// the watch began (it has no event of its own), and does not reload a file
// that did not change. Load fails here, so each load is only seen.
func TestReloaderBaseline(t *testing.T) {
	tests := []struct {
		name        string
		beforeWatch string // written after the baseline, before run; "" for none
		want        string // the content the first load sees
	}{
		{"edited before the watch began", "b", "b"},
		{"unchanged until an edit while watched", "", "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "server.yaml")
			testkit.WriteAtomic(t, path, "a")
			loads := make(chan string, 8)
			r := &reloader{log: slog.New(slog.DiscardHandler), src: Reload{Path: path, Interval: time.Hour,
				Load: func() (*v1alpha1.ServerConfiguration, error) {
					b, err := os.ReadFile(path)
					loads <- string(b)
					return nil, errors.Join(err, errors.New("not applied here"))
				}}}
			r.last, _ = r.fingerprint() // as Run takes it
			if tt.beforeWatch != "" {
				testkit.WriteAtomic(t, path, tt.beforeWatch)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			if tt.beforeWatch == "" {
				testkit.WriteAtomic(t, path, "c")
			}
			select {
			case got := <-loads:
				if got != tt.want {
					t.Fatalf("the first load read %q, want %q", got, tt.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no load of %q within 20s", tt.want)
			}
		})
	}
}
