package clusterdns_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
)

// TestCheck: Check builds what Run would and returns the error Run would
// start with, binding nothing.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(t, resolv, "nameserver 127.0.0.7\n")
	hosts := filepath.Join(dir, "hosts")
	testkit.WriteFile(t, hosts, "192.0.2.1 a.example\n")
	for _, tc := range []struct {
		name    string
		forward []v1alpha1.ForwardRoute
		hosts   string
		fails   bool
	}{
		{name: "one route", forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{resolv}}}, hosts: hosts},
		{name: "two routes to one resolv.conf", forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{resolv}}, {Zone: "corp.example", Upstreams: []string{resolv}}}},
		{name: "missing resolv.conf", forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{filepath.Join(dir, "nope")}}}, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.2:53"}, Forward: tc.forward}
			cfg.Hosts.File = tc.hosts
			cfg.SetDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			err := clusterdns.Check(context.Background(), cfg)
			if (err != nil) != tc.fails {
				t.Fatalf("Check: %v, want failure %v", err, tc.fails)
			}
		})
	}
}
