package cri

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "shim.sock")
	l, err := Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != SocketMode || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode = %v, want socket %o", fi.Mode(), SocketMode)
	}

	// A live socket is refused.
	if _, err := Listen(path); !errors.Is(err, ErrSocketInUse) || !strings.Contains(err.Error(), path) {
		t.Errorf("Listen on a live socket = %v, want ErrSocketInUse naming the path", err)
	}

	// A stale socket (its process gone) is replaced: leave one behind.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	l, err = Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l.Close()

	// A file that is not a socket is never removed.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file = %v, want not a socket", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("regular file removed: %v", err)
	}
	if _, err := Listen(""); err == nil {
		t.Error("Listen(\"\") succeeded")
	}
}

func TestNewErrors(t *testing.T) {
	for _, ep := range []string{"tcp://127.0.0.1:1", "relative.sock", "npipe:////./pipe/x"} {
		if _, err := newServerForTest(ep); err == nil || !strings.Contains(err.Error(), ep) {
			t.Errorf("New(%q) = %v, want an error naming it", ep, err)
		}
	}
	if _, err := newServerForTest("/run/x.sock", WithLimits("cut")); err == nil || !strings.Contains(err.Error(), `"cut"`) {
		t.Errorf("New with limits cut = %v", err)
	}
	if _, err := newServerForTest("/run/x.sock", WithFailurePolicy("maybe")); err == nil || !strings.Contains(err.Error(), `"maybe"`) {
		t.Errorf("New with failure policy maybe = %v", err)
	}
	s, err := newServerForTest("/run/x.sock")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
