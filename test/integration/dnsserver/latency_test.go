package dnsserver_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// writes is how many API writes TestProgrammingLatency times per case.
const writes = 100

// TestProgrammingLatency measures how long an API write takes to show in
// the DNS answers: the clock starts before the write request and stops at
// the first UDP answer that has the new data (questions every 2ms). Half
// the writes create a ClusterIP Service (its A record appears), half move a
// headless Service's endpoint to a new address (the A record changes).
// It runs the feed as shipped (every change published at once, those that
// arrive during a publish coalesced into the next) with isolated and with
// back-to-back writes. Run with -v to see the numbers.
func TestProgrammingLatency(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	for _, tc := range []struct {
		name  string
		pause time.Duration // quiet time before each write (not timed)
	}{
		{"isolated writes", 20 * time.Millisecond},
		{"back-to-back writes", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, client, srv := syncedServer(t, cp)
			ctx := t.Context()

			slice := createHeadless(t, client, ns, "moving", "10.244.9.0")
			moving := "moving." + ns + ".svc." + zone + "."
			waitAnswer(t, srv.addr, moving, dns.TypeA, "NOERROR A 10.244.9.0")

			var created, moved []time.Duration
			for i := range writes {
				time.Sleep(tc.pause)
				start := time.Now()
				var name, want string
				if i%2 == 0 {
					s := createService(t, client, ns, fmt.Sprintf("s%d", i), corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}})
					name, want = s.Name+"."+ns+".svc."+zone+".", "NOERROR A "+s.Spec.ClusterIP
				} else {
					ip := fmt.Sprintf("10.244.9.%d", i)
					slice.Endpoints[0].Addresses = []string{ip}
					updated, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					slice = updated
					name, want = moving, "NOERROR A "+ip
				}
				waitAnswer(t, srv.addr, name, dns.TypeA, want)
				took := time.Since(start)
				if i%2 == 0 {
					created = append(created, took)
				} else {
					moved = append(moved, took)
				}
			}
			all := append(slices.Clone(created), moved...)
			t.Logf("programming latency over %d writes: p50 %v p99 %v max %v", len(all), percentile(all, 50), percentile(all, 99), percentile(all, 100))
			t.Logf("  service created (%d): p50 %v p99 %v", len(created), percentile(created, 50), percentile(created, 99))
			t.Logf("  endpoint moved (%d):  p50 %v p99 %v", len(moved), percentile(moved, 50), percentile(moved, 99))
		})
	}
}

// percentile returns the nearest-rank p-th percentile of d.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)].Round(100 * time.Microsecond)
}
