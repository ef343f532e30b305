//go:build unix

package resolvconf_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// TestReadFileFIFO: a named pipe in the file's place, with no writer, is
// refused at once instead of blocking the open until a writer comes.
func TestReadFileFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	testkit.FIFO(t, p)
	done := make(chan error, 1)
	go func() {
		_, err := resolvconf.ReadFile(p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, resolvconf.ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), p) {
			t.Errorf("err = %v, want ErrNotRegular naming the path and a named pipe", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile blocked on a named pipe")
	}
	if _, err := resolvconf.ParseFile(p); !errors.Is(err, resolvconf.ErrNotRegular) {
		t.Errorf("ParseFile: err = %v, want ErrNotRegular", err)
	}
}
