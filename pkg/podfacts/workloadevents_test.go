package podfacts

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWorkload(t *testing.T) {
	cases := []struct {
		name       string
		pod        PodRef
		kind, want string
	}{
		{"deployment", PodRef{Name: "web-7d9f8b6c5-x2k4p", Labels: map[string]string{"pod-template-hash": "7d9f8b6c5"}}, "Deployment", "web"},
		{"deployment with dashes", PodRef{Name: "my-web-app-5c6d-abcde", Labels: map[string]string{"pod-template-hash": "5c6d"}}, "Deployment", "my-web-app"},
		{"hash not in the name", PodRef{Name: "web-abcde", Labels: map[string]string{"pod-template-hash": "zzz"}}, "", ""},
		{"statefulset", PodRef{Name: "db-12", Labels: map[string]string{"statefulset.kubernetes.io/pod-name": "db-12", "controller-revision-hash": "db-6f"}}, "StatefulSet", "db"},
		{"daemonset", PodRef{Name: "agent-q7w8e", Labels: map[string]string{"controller-revision-hash": "5b9", "pod-template-generation": "3"}}, "DaemonSet", "agent"},
		{"job", PodRef{Name: "backup-29311-kx8zq", Labels: map[string]string{"batch.kubernetes.io/job-name": "backup-29311", "job-name": "backup-29311"}}, "Job", "backup-29311"},
		{"old job label", PodRef{Name: "j-abc", Labels: map[string]string{"job-name": "j"}}, "Job", "j"},
		{"bare pod", PodRef{Name: "debug", Labels: map[string]string{"app": "x"}}, "", ""},
		{"no labels", PodRef{Name: "web-7d9f8b6c5-x2k4p"}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kind, name, ok := Workload(tc.pod)
			if kind != tc.kind || name != tc.want || ok != (tc.kind != "") {
				t.Errorf("Workload = %q %q %v, want %q %q", kind, name, ok, tc.kind, tc.want)
			}
		})
	}
}

type recordedEvents struct{ got []string }

func (r *recordedEvents) Warning(pod PodRef, reason, message string) {
	r.got = append(r.got, pod.Name+" "+reason+" "+message)
}

// TestWorkloadEvents: 50 replicas of one Deployment with the same limit
// warning post one Event naming the workload and the fix, the other 49 are
// counted; after the window it is posted again; a bare pod and another
// message pass; past the bound, Events pass undeduplicated.
func TestWorkloadEvents(t *testing.T) {
	rec := &recordedEvents{}
	reg := prometheus.NewRegistry()
	w, err := NewWorkloadEvents(rec, time.Hour, 3, reg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	w.now = func() time.Time { return now }
	const msg = "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: a b"
	replica := func(i int) PodRef {
		return PodRef{Namespace: "shop", Name: "web-5c6d-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Labels: map[string]string{"pod-template-hash": "5c6d"}}
	}
	for i := range 50 {
		w.Warning(replica(i), "DNSConfigForming", msg)
	}
	if len(rec.got) != 1 || !strings.Contains(rec.got[0], "every pod of Deployment web gets this") ||
		!strings.Contains(rec.got[0], "spec.template.spec.dnsConfig.searches") {
		t.Fatalf("posted %d Events: %q", len(rec.got), rec.got)
	}
	if n := testutil.ToFloat64(w.suppressed.WithLabelValues("DNSConfigForming")); n != 49 {
		t.Errorf("suppressed %v, want 49", n)
	}
	w.Warning(PodRef{Namespace: "shop", Name: "debug"}, "DNSConfigForming", msg)
	w.Warning(replica(0), "DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1 2 3")
	if len(rec.got) != 3 || rec.got[1] != "debug DNSConfigForming "+msg || !strings.Contains(rec.got[2], "dnsConfig.nameservers") {
		t.Errorf("bare pod or other message: %q", rec.got[1:])
	}
	now = now.Add(time.Hour)
	w.Warning(replica(3), "DNSConfigForming", msg)
	if len(rec.got) != 4 {
		t.Errorf("not posted again after the window: %d Events", len(rec.got))
	}
	// The bound: 3 keys held (web/search, web/nameserver, and one more).
	for _, d := range []string{"a", "b", "c"} {
		w.Warning(PodRef{Namespace: "shop", Name: d + "-h1-xyz", Labels: map[string]string{"pod-template-hash": "h1"}}, "DNSConfigForming", msg)
		w.Warning(PodRef{Namespace: "shop", Name: d + "-h1-xyz", Labels: map[string]string{"pod-template-hash": "h1"}}, "DNSConfigForming", msg)
	}
	if len(w.seen) > 3 {
		t.Errorf("holds %d workloads, bound 3", len(w.seen))
	}
	if got := len(rec.got) - 4; got < 4 {
		t.Errorf("past the bound: %d of 6 Events posted; want the ones it cannot track posted every time", got)
	}
}
