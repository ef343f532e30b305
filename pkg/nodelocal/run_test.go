package nodelocal

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
)

// TestStageConfigErrors: a configuration the stage cannot apply fails
// NewStage or Run with an error marked v1alpha1.ErrConfig; a wrong mode is
// a caller's bug, not marked.
func TestStageConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		change func(*v1alpha1.ServerConfiguration)
		marked bool
		msg    string // the error, when given
	}{
		{"cluster mode", func(c *v1alpha1.ServerConfiguration) { c.Mode = v1alpha1.ModeCluster }, false, ""},
		{"cluster upstream is the stage", func(c *v1alpha1.ServerConfiguration) { c.NodeLocal.ClusterUpstream = []string{"127.0.0.1:5399"} }, true, ""},
		{"cluster config missing", func(c *v1alpha1.ServerConfiguration) { c.NodeLocal.ClusterConfig = "/nonexistent/config.yaml" }, true, ""},
		// The rule is v1alpha1.ValidateClusterDomain's, under the field's name.
		{"bad cluster domain", func(c *v1alpha1.ServerConfiguration) { c.ClusterDomain = "cluster..local" }, true,
			`clusterDomain: "cluster..local" is not a domain such as "cluster.local": has an empty label`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			none := ""
			cfg := &v1alpha1.ServerConfiguration{Mode: v1alpha1.ModeNodeLocal, Listen: []string{"127.0.0.1:5399"},
				NodeLocal: v1alpha1.NodeLocal{ClusterUpstream: []string{"127.0.0.1:5398"}, ResolvConf: &none}}
			tc.change(cfg)
			cfg.SetDefaults()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stage, err := NewStage(cfg, Deps{LoadConfig: loadFile})
			if err == nil {
				err = stage.Run(ctx)
			}
			if err == nil || ctx.Err() != nil {
				t.Fatalf("err %v (context: %v), want a failure at start", err, ctx.Err())
			}
			if got := errors.Is(err, v1alpha1.ErrConfig); got != tc.marked {
				t.Errorf("%v: marked ErrConfig %v, want %v", err, got, tc.marked)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("err %q, want %q", err, tc.msg)
			}
		})
	}
}

// TestReadiness: the stage is ready once it serves DNS and until its
// lameduck; while a newer instance runs on the node (a surge pod, whose
// probes may reach this one's port) the newest one's state answers.
func TestReadiness(t *testing.T) {
	ctx := context.Background()
	lock := filepath.Join(t.TempDir(), "nl.lock")
	setup := func() *nodenet.Manager {
		m, err := nodenet.New(nodenet.Config{IPs: []netip.Addr{netip.MustParseAddr("169.254.20.10")}, LockFile: lock})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	ready := func(checks []health.Check) error {
		for _, c := range checks {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}
	newServer := func() *dnsserver.Server {
		return &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {}), Lameduck: 300 * time.Millisecond}
	}
	oldSrv, oldSetup := newServer(), setup()
	defer oldSetup.Release()
	old := readiness(oldSrv, oldSetup)
	if err := ready(old); err == nil || !strings.Contains(err.Error(), "not serving DNS yet") {
		t.Errorf("before it serves: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan struct{})
	go func() { _ = oldSrv.Run(runCtx); close(ran) }()
	defer func() { <-ran }()
	<-oldSrv.Serving()
	oldSetup.Serving(true)
	if err := ready(old); err != nil {
		t.Errorf("serving: %v", err)
	}

	newSrv, newSetup := newServer(), setup()
	next := readiness(newSrv, newSetup)
	for name, checks := range map[string][]health.Check{"the old instance": old, "the new instance": next} {
		if err := ready(checks); err == nil {
			t.Errorf("%s ready while the new one does not serve yet", name)
		}
	}
	if err := newSrv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer newSrv.Shutdown(ctx)
	newSetup.Serving(true)
	for name, checks := range map[string][]health.Check{"the old instance": old, "the new instance": next} {
		if err := ready(checks); err != nil {
			t.Errorf("%s, the new one serving: %v", name, err)
		}
	}
	// The new one stops (a failed rollout, undone): the old one answers for
	// itself again.
	newSetup.Serving(false)
	if err := ready(old); err == nil || !strings.Contains(err.Error(), "a newer instance runs on this node") {
		t.Errorf("the old instance, the new one stopping: %v", err)
	}
	if err := newSetup.Release(); err != nil {
		t.Fatal(err)
	}
	if err := ready(old); err != nil {
		t.Errorf("the old instance, the new one gone: %v", err)
	}
	stop()
	if !testkit.Poll(5*time.Second, time.Millisecond, func() bool { err := ready(old); return err != nil && strings.Contains(err.Error(), "lameduck") }) {
		t.Errorf("the old instance in its lameduck: %v", ready(old))
	}
}
