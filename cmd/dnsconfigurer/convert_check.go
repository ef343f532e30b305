package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
)

// checkStarts builds the server serve would run from cfg (clusterdns.Check:
// no port bound, no cluster read), so that convert never writes a
// configuration serve refuses or crashes on. The files cfg names are the
// pod's, not this machine's: each resolv.conf and the hosts file are
// stood in by files in a temporary directory, one per path, so routes that
// share a file here share it there too. A node-local configuration is
// validated only.
func checkStarts(ctx context.Context, cfg v1alpha1.ServerConfiguration) error {
	c, err := cfg.Copy()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dnsconfigurer-convert-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	standIns := map[string]string{}
	standIn := func(path, content string) (string, error) {
		if p, ok := standIns[path]; ok {
			return p, nil
		}
		p := filepath.Join(dir, fmt.Sprintf("file%d", len(standIns)))
		standIns[path] = p
		return p, os.WriteFile(p, []byte(content), 0o600)
	}
	for i := range c.Forward {
		if path := c.Forward[i].ResolvConf(); path != "" {
			if c.Forward[i].Upstreams[0], err = standIn(path, "nameserver 127.0.0.1\n"); err != nil {
				return err
			}
		}
	}
	if c.Hosts.File != "" {
		if c.Hosts.File, err = standIn(c.Hosts.File, ""); err != nil {
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
