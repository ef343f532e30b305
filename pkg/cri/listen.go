package cri

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrSocketInUse reports a listen path on which a live process accepts
// connections.
var ErrSocketInUse = errors.New("cri: socket is in use by a live process")

// SocketMode is the mode of the shim's socket: kubelet (root) and the
// socket's group may connect.
const SocketMode = 0o660

// Listen creates the shim's unix socket at path (or unix:///path) with
// mode SocketMode. A stale socket left by a process that died is removed;
// a socket some live process still serves is an error wrapping
// ErrSocketInUse, and so is a path that is not a socket.
func Listen(path string) (net.Listener, error) {
	path = strings.TrimPrefix(path, "unix://")
	if path == "" {
		return nil, errors.New("cri: listen: empty socket path")
	}
	fi, err := os.Lstat(path)
	switch {
	case err == nil:
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("cri: listen %q: the path exists and is not a socket (%s); not removing it", path, fi.Mode().Type())
		}
		c, derr := net.DialTimeout("unix", path, time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("cri: listen %q: %w (is another shim running?)", path, ErrSocketInUse)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cri: listen %q: remove stale socket: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("cri: listen %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cri: listen %q: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("cri: listen %q: %w", path, err)
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		l.Close()
		return nil, fmt.Errorf("cri: listen %q: chmod: %w", path, err)
	}
	return l, nil
}
