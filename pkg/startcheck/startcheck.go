package startcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
)

// Run checks that serve starts on cfg, on its own goroutine:
// clusterdns.Check of tens of thousands of routes takes seconds and does
// not stop at once with ctx. err is the check's; stopped is ctx's cause
// when ctx ends first. The stand-in files are removed before Run returns,
// stopped or not.
func Run(ctx context.Context, cfg v1alpha1.ServerConfiguration) (err, stopped error) {
	files := &standIns{}
	defer files.close()
	done := make(chan error, 1)
	go func() { done <- check(ctx, cfg, files) }()
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return err, context.Cause(ctx)
	}
	return err, nil
}

// check builds the server serve would run from cfg, each resolv.conf and
// the hosts file stood in by files, one per path, so that routes that
// share a file here share it there too. A node-local configuration is
// validated only.
func check(ctx context.Context, cfg v1alpha1.ServerConfiguration, files *standIns) error {
	c, err := cfg.Copy()
	if err != nil {
		return err
	}
	for i := range c.Forward {
		r := &c.Forward[i]
		if path := r.ResolvConf(); path != "" {
			// The path may stand among addresses (forward . 8.8.8.8 /etc/resolv.conf).
			j := slices.Index(r.Upstreams, path)
			if r.Upstreams[j], err = files.file(path, "nameserver 127.0.0.1\n"); err != nil {
				return err
			}
		}
		if t := r.TLS; t != nil {
			// The CA and client certificate files are the node's, as its
			// resolv.conf: serve reads them at start.
			r.TLS = &v1alpha1.ForwardTLS{ServerName: t.ServerName}
		}
	}
	if c.Hosts.File != "" {
		if c.Hosts.File, err = files.file(c.Hosts.File, ""); err != nil {
			return err
		}
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Mode == v1alpha1.ModeNodeLocal {
		// The node-local stage builds its parts on the node (interfaces,
		// nftables); its configuration is checked by Validate alone.
		return nil
	}
	return clusterdns.Check(ctx, &c)
}

// standIns are check's stand-in files: files in memory where the
// system has them (memfd, named by /proc/self/fd), which vanish with the
// process however it ends, else in a temporary directory made for the
// first one. close removes them; a stand-in asked for after that is an
// error.
type standIns struct {
	mu     sync.Mutex
	dir    string
	open   []*os.File
	paths  map[string]string
	closed bool
}

// file is the stand-in of path, holding content.
func (s *standIns) file(path, content string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("stand-in files: closed")
	}
	if p, ok := s.paths[path]; ok {
		return p, nil
	}
	if s.paths == nil {
		s.paths = map[string]string{}
	}
	if f, err := memFile(content); err == nil {
		s.open = append(s.open, f)
		p := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
		s.paths[path] = p
		return p, nil
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "dnsconfigurer-convert-check-")
		if err != nil {
			return "", err
		}
		s.dir = dir
	}
	p := filepath.Join(s.dir, fmt.Sprintf("file%d", len(s.paths)))
	s.paths[path] = p
	return p, os.WriteFile(p, []byte(content), 0o600)
}

func (s *standIns) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, f := range s.open {
		f.Close()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
