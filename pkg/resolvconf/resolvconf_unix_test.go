//go:build unix

package resolvconf

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFileFIFO: a named pipe in the file's place, with no writer, is
// refused at once instead of blocking the open until a writer comes.
func TestReadFileFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), p) {
			t.Errorf("err = %v, want ErrNotRegular naming the path and a named pipe", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile blocked on a named pipe")
	}
	if _, err := ParseFile(p); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ParseFile: err = %v, want ErrNotRegular", err)
	}
}
