package clusterdns_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
)

// TestServerConfigErrors: a configuration the server cannot apply fails
// New or Run with an error marked v1alpha1.ErrConfig (the command's usage
// error); a wrong mode is a caller's bug, not marked.
func TestServerConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		change func(*v1alpha1.ServerConfiguration)
		marked bool
	}{
		{"node-local mode", func(c *v1alpha1.ServerConfiguration) { c.Mode = v1alpha1.ModeNodeLocal }, false},
		{"missing objects", func(c *v1alpha1.ServerConfiguration) { c.Objects = filepath.Join(dir, "nope") }, true},
		{"no record source", func(c *v1alpha1.ServerConfiguration) { c.Objects = "" }, true},
		{"missing resolv.conf", func(c *v1alpha1.ServerConfiguration) {
			c.Forward = []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{filepath.Join(dir, "resolv.conf")}}}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.1:0"}, Objects: dir}
			tc.change(cfg)
			cfg.SetDefaults()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv, err := clusterdns.New(cfg, clusterdns.Deps{})
			if err == nil {
				err = srv.Run(ctx)
			}
			if err == nil || ctx.Err() != nil {
				t.Fatalf("err %v (context: %v), want a failure at start", err, ctx.Err())
			}
			if got := errors.Is(err, v1alpha1.ErrConfig); got != tc.marked {
				t.Errorf("%v: marked ErrConfig %v, want %v", err, got, tc.marked)
			}
		})
	}
}

// TestServerAfterSync: the server calls Deps.AfterSync once, after the
// records first synced, and keeps serving.
func TestServerAfterSync(t *testing.T) {
	cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.1:0"}, MetricsListen: "127.0.0.1:0", Objects: t.TempDir(), Lameduck: "1ms"}
	cfg.SetDefaults()
	called := make(chan struct{}, 2)
	srv, err := clusterdns.New(cfg, clusterdns.Deps{AfterSync: func() { called <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	select {
	case <-called:
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before AfterSync: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("AfterSync not called within 10s of start")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(called) != 0 {
		t.Error("AfterSync called more than once")
	}
}

// TestServerSkips: fed by an API server, the server counts an object it
// cannot serve on its registry and posts a Warning Event on it through the
// same client (a fake clientset here; test/integration/dnsserver has the
// real API server).
func TestServerSkips(t *testing.T) {
	long := strings.Repeat("a", 64) + ".example.com"
	client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "prod"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: long}})
	cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.1:0"}, Lameduck: "1ms"}
	cfg.SetDefaults()
	reg := prometheus.NewRegistry()
	srv, err := clusterdns.New(cfg, clusterdns.Deps{Client: client, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	run := testkit.Go(t, "Run", srv.Run)
	series := testkit.Key("dnsconfigurer_dnsserver_objects_skipped_total", "kind", kubefeed.KindService, "reason", kubefeed.ReasonInvalidField)
	testkit.WaitFor(t, 10*time.Second, func() error {
		if got := testkit.Gather(t, reg)[series]; got != 1 {
			return fmt.Errorf("%s = %v, want 1", series, got)
		}
		return nil
	})
	testkit.WaitFor(t, 10*time.Second, func() error {
		list, err := client.CoreV1().Events("prod").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d events, want 1", len(list.Items))
		}
		e := list.Items[0]
		if e.Type != corev1.EventTypeWarning || e.Reason != kubefeed.EventReasonSkipped || e.InvolvedObject.Name != "ext" ||
			e.Source.Component != kubefeed.EventComponent || !strings.Contains(e.Message, "spec.externalName") {
			return fmt.Errorf("event %+v", e)
		}
		return nil
	})
	run.Stop()
}
