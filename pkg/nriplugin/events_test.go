package nriplugin

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// fakeEvents records the Warning Events posted to it.
type fakeEvents struct {
	mu  sync.Mutex
	got []string
}

var _ podfacts.EventSink = (*fakeEvents)(nil)

func (f *fakeEvents) Warning(pod podfacts.PodRef, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, pod.Namespace+"/"+pod.Name+" "+pod.UID+" "+reason+": "+message)
}

func (f *fakeEvents) events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

func TestEvents(t *testing.T) {
	none4 := policy.Input{Name: "web", Namespace: "team", Policy: policy.None,
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}}}
	// kubelet's Event text for four nameservers (pkg/kubelet/network/dns).
	const over = "DNSConfigForming: Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.0.0.1 10.0.0.2 10.0.0.3"
	tests := []struct {
		name   string
		limits Limits
		uid    string
		run    bool // RunPodSandbox rather than CreateContainer
		want   []string
	}{
		{name: "trim", limits: LimitsTrim, uid: "u-over", want: []string{"team/web u-over " + over}},
		{name: "reject at CreateContainer", limits: LimitsReject, uid: "u-over", want: []string{"team/web u-over " + over}},
		{name: "reject at RunPodSandbox", limits: LimitsReject, uid: "u-over", run: true, want: []string{"team/web u-over " + over}},
		{name: "within the limits", limits: LimitsTrim, uid: "u-ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &fakeEvents{}
			p := newPlugin(t, WithLimits(tt.limits), WithEvents(ev),
				WithPodLookup(fakeLookup{"u-over": none4, "u-ok": {Name: "web", Namespace: "team", Policy: policy.Default}}, 0))
			pod, ctr := sandbox(t, tt.uid, clusterFirst, nil, false)
			if tt.run {
				_ = p.RunPodSandbox(context.Background(), pod)
			} else {
				_, _, _ = p.CreateContainer(context.Background(), pod, ctr)
			}
			if got := ev.events(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestNoEventsWithoutSink: without WithEvents a trimmed pod posts nothing
// and does not fail.
func TestNoEventsWithoutSink(t *testing.T) {
	none4 := policy.Input{Name: "web", Namespace: "team", Policy: policy.None,
		DNSConfig: &policy.DNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}}}
	p := newPlugin(t, WithPodLookup(fakeLookup{"u-over": none4}, 0))
	pod, ctr := sandbox(t, "u-over", clusterFirst, nil, false)
	adj, _, err := p.CreateContainer(context.Background(), pod, ctr)
	if err != nil || adj == nil {
		t.Errorf("CreateContainer = %v, %v; want an adjustment", adj, err)
	}
}
