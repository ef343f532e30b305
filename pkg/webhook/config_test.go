package webhook

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// TestNewReviewer: each pool takes the cluster's settings with its own OS,
// node-local DNS and resolver; the resolver is read as kubelet reads the
// file; a pool's bad setting names the pool.
func TestNewReviewer(t *testing.T) {
	cfg := &v1alpha1.WebhookConfiguration{
		Cluster:      v1alpha1.NodeDNS{ClusterDNS: []string{"10.96.0.10"}},
		NodeResolver: v1alpha1.NodeResolver{Nameservers: []string{"10.0.0.2"}, Searches: []string{"corp.example.", "."}},
		NodePools: []v1alpha1.NodePool{
			{Name: "win", NodeSelector: map[string]string{"os": "windows"}, NodeOS: v1alpha1.NodeOSWindows},
			{Name: "off", NodeResolver: &v1alpha1.NodeResolver{Disabled: true}},
		},
		Trims: v1alpha1.TrimsDeny,
	}
	r, _, err := NewReviewer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !r.DenyTrims || r.SkipWorkloads || r.ClusterPolicy {
		t.Errorf("DenyTrims %v, SkipWorkloads %v, ClusterPolicy %v; want true, false, false", r.DenyTrims, r.SkipWorkloads, r.ClusterPolicy)
	}
	if got := r.Default.Host; !reflect.DeepEqual(got.Searches, []string{"corp.example"}) || !reflect.DeepEqual(got.Nameservers, []string{"10.0.0.2"}) {
		t.Errorf("default host %+v, want searches [corp.example] (dot trimmed, lone dot dropped)", got)
	}
	if len(r.Pools) != 2 || r.Pools[0].Name != "win" || !reflect.DeepEqual(r.Pools[0].Host, r.Default.Host) || !r.Pools[1].Host.Disabled {
		t.Errorf("pools %+v", r.Pools)
	}
	cfg.NodePools[0].NodeOS = "plan9"
	if _, _, err := NewReviewer(cfg); err == nil || !strings.HasPrefix(err.Error(), "nodePools[0]: ") {
		t.Errorf("a bad pool: err %v, want one naming nodePools[0]", err)
	}
}
