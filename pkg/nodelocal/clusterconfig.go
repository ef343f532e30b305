package nodelocal

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hosts"
)

// LoadFunc reads a ServerConfiguration file: parsed strictly, defaulted
// and validated by api/v1alpha1 (serve's own loader).
type LoadFunc func(path string) (*v1alpha1.ServerConfiguration, error)

// follower keeps the router's routes those of the cluster DNS's
// configuration file (nodeLocal.clusterConfig) and of its hosts file. A
// bad configuration keeps the last good routes; a hosts file that cannot be
// read keeps its last good names, or sends every name to the cluster DNS
// when it was never read.
type follower struct {
	path   string
	load   LoadFunc
	domain string
	r      *router
	log    *slog.Logger
	m      *routeMetrics
	opts   []filewatch.Option

	// The hosts file of the configuration in service, and its last good
	// names.
	hostsPath  string
	hostsNames []string
	hostsOK    bool
	last       string // the last problem logged, "" if none
}

// reload reads the files and puts their routes in service; an error keeps
// the routes in service.
func (f *follower) reload() error {
	cl, err := f.load(f.path)
	if err == nil && cl.Mode != v1alpha1.ModeCluster {
		err = fmt.Errorf("mode %q: not the cluster DNS's configuration", cl.Mode)
	}
	if err != nil {
		f.m.configErrors.Inc()
		f.m.configOK.Set(0)
		return fmt.Errorf("nodeLocal.clusterConfig %q: %w", f.path, err)
	}
	f.m.configOK.Set(1)
	names, herr := f.readHosts(cl.Hosts.File)
	r := NewRoutes(f.domain, cl, slices.Values(names), herr)
	old := f.r.routes.Swap(r)
	f.m.routes.Set(float64(r.Len()))
	unbounded := 0.0
	if len(r.Unbounded()) > 0 {
		unbounded = 1
	}
	f.m.unbounded.Set(unbounded)
	if old == nil || old.Len() != r.Len() || !slices.Equal(old.Unbounded(), r.Unbounded()) {
		f.log.Info("cluster DNS routes", "clusterConfig", f.path, "zonesAndNames", r.Len(), "forwardRoutes", len(cl.Forward),
			"overrides", len(cl.Overrides), "hostsNames", len(names), "rewrites", len(cl.Rewrites))
		if len(r.Unbounded()) > 0 {
			f.log.Warn("every name goes to the cluster DNS: a rule of its configuration cannot be bounded to zones", "why", r.Unbounded())
		}
	}
	return nil
}

// readHosts returns the names of the hosts file path ("": none).
func (f *follower) readHosts(path string) ([]string, error) {
	if path == "" {
		f.hostsPath, f.hostsNames, f.hostsOK = "", nil, false
		return nil, nil
	}
	data, _, err := safefile.Read(path, hosts.MaxFileSize)
	var t *hosts.Table
	if err == nil {
		t, _, err = hosts.Parse(bytes.NewReader(data))
	}
	if err != nil {
		if path == f.hostsPath && f.hostsOK {
			f.log.Warn("cluster DNS hosts file unreadable: keeping its last good names", "path", path, "err", err)
			return f.hostsNames, nil
		}
		f.hostsPath, f.hostsNames, f.hostsOK = path, nil, false
		return nil, err
	}
	f.hostsPath, f.hostsNames, f.hostsOK = path, slices.Collect(t.Names()), true
	return f.hostsNames, nil
}

// reloadLogged is reload, its error logged once until it changes.
func (f *follower) reloadLogged() {
	err := f.reload()
	switch {
	case err == nil:
		if f.last != "" {
			f.log.Info("cluster DNS configuration good again", "clusterConfig", f.path)
		}
		f.last = ""
	case err.Error() != f.last:
		f.last = err.Error()
		f.log.Error("cluster DNS configuration: keeping the routes in service", "err", err)
	}
}

// run follows the files until ctx is done: the configuration and the
// hosts file it names, watched again when that name changes.
func (f *follower) run(ctx context.Context) error {
	for {
		paths := []string{f.path}
		if f.hostsPath != "" {
			paths = append(paths, f.hostsPath)
		}
		wctx, cancel := context.WithCancel(ctx)
		ch, err := filewatch.Watch(wctx, paths, append([]filewatch.Option{filewatch.WithLogger(f.log), filewatch.AllowMissing(paths...)}, f.opts...)...)
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("nodeLocal.clusterConfig: %w", err)
		}
		// A change before the watch began is not reported.
		f.reloadLogged()
		for moved := false; !moved; {
			if _, ok := <-ch; !ok {
				cancel()
				return nil
			}
			before := f.hostsPath
			f.reloadLogged()
			moved = f.hostsPath != before
		}
		cancel()
		for range ch { // the watch stops with wctx
		}
	}
}
