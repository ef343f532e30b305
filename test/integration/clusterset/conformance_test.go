package clusterset_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

const (
	// The two clusters of the clusterset: the test's API server is
	// cluster-a's, whose DNS is asked; cluster-b exports the same
	// Services.
	clusterA = "cluster-a"
	clusterB = "cluster-b"
	// hello is the conformance suite's Service: ports tcp/42 and udp/42.
	hello = "hello"
	// followBound is how long one check may wait for its answer once
	// serve answers the clusterset zone at all.
	followBound = 15 * time.Second
)

// TestConformanceDNS runs the DNS checks of the mcs-api conformance suite
// (conformance/clusterip_service_dns.go and headless_service_dns.go at
// kubernetes-sigs/mcs-api) against `dnsconfigurer serve --clusterset-zone
// clusterset.local`. The test is the MCS controller: for a ClusterSetIP
// Service and a headless StatefulSet-like Service, both exported from two
// clusters and dual-stack, it writes the v1beta1 ServiceImports (ips,
// ipFamilies, ports, the Ready condition) and the EndpointSlices of both
// clusters, labelled with the service and the source cluster, into an API
// server whose CRDs store v1beta1. The facts checked are the suite's:
//
//   - <svc>.<ns>.svc.clusterset.local A/AAAA of a ClusterSetIP import are
//     its clusterset IPs of that family;
//   - its bare SRV is one record (the ports share the number 42) with port
//     42 and the service name as target;
//   - <svc>.<ns>.svc.cluster.local resolves the local Service only;
//   - a headless import's A/AAAA are the ready endpoint addresses of every
//     backing pod of every cluster, of that family;
//   - <hostname>.<clusterid>.<svc>.<ns>.svc.clusterset.local is that pod's
//     address;
//   - a headless import's bare SRV has one record per endpoint, port 42,
//     each target starting with the endpoint's hostname.
//
// CoreDNS 1.15 (reading the same imports as v1alpha1) is asked the same
// checks as a reference for the checks themselves: its failures are
// logged, serve's fail the test.
func TestConformanceDNS(t *testing.T) {
	cp := apiserver.Require(t, controlPlane)
	client, dyn := clients(t, cp)
	installCRDs(t)
	if v := storageVersion(t, dyn); v != "v1beta1" {
		t.Fatalf("serviceimports are stored as %q, want v1beta1", v)
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	ports := []mcsv1beta1.ServicePort{{Name: "tcp", Port: 42, Protocol: tcp}, {Name: "udp", Port: 42, Protocol: udp}}
	slicePorts := []discoveryv1.EndpointPort{port("tcp", 42, tcp), port("udp", 42, udp)}
	families := []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	ready := &mcsv1beta1.ServiceImportStatus{
		Clusters: []mcsv1beta1.ClusterStatus{{Cluster: clusterA}, {Cluster: clusterB}},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready",
			Message: "imported from 2 clusters", LastTransitionTime: metav1.Now()}},
	}

	// The ClusterSetIP Service: a local hello in cluster-a, exported from
	// both clusters, imported with a dual-stack clusterset IP.
	ipNS := cp.Namespace(t)
	local := createService(t, client, ipNS, hello, corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "tcp", Port: 42, Protocol: tcp}, {Name: "udp", Port: 42, Protocol: udp}}})
	setIPs := []string{"10.200.42.1", "fd00:200:42::1"}
	createImport(t, dyn, importsV1beta1, ipNS, hello, mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.ClusterSetIP, IPs: setIPs, IPFamilies: families, Ports: ports,
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(10))}},
	}, ready)
	for i, c := range []string{clusterA, clusterB} {
		createMCSSlice(t, client, ipNS, hello, c, discoveryv1.AddressTypeIPv4, slicePorts,
			endpoint{addr: fmt.Sprintf("10.%d.42.1", 11+i), ready: new(true)})
		createMCSSlice(t, client, ipNS, hello, c, discoveryv1.AddressTypeIPv6, slicePorts,
			endpoint{addr: fmt.Sprintf("fd00:%d:42::1", 11+i), ready: new(true)})
	}

	// The headless StatefulSet-like Service: hello-ss-0 and hello-ss-1 in
	// each cluster, dual-stack; cluster-b's hello-ss-2 is not ready.
	hlNS := cp.Namespace(t)
	createService(t, client, hlNS, hello, corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{
		{Name: "tcp", Port: 42, Protocol: tcp}, {Name: "udp", Port: 42, Protocol: udp}}})
	createLocalSlice(t, client, hlNS, hello, slicePorts,
		endpoint{addr: "10.11.0.1", hostname: "hello-ss-0", ready: new(true)},
		endpoint{addr: "10.11.0.2", hostname: "hello-ss-1", ready: new(true)})
	pods := map[string][]endpoint{ // by cluster and family
		clusterA + "/IPv4": {{addr: "10.11.0.1", hostname: "hello-ss-0", ready: new(true)}, {addr: "10.11.0.2", hostname: "hello-ss-1", ready: new(true)}},
		clusterA + "/IPv6": {{addr: "fd00:11::1", hostname: "hello-ss-0", ready: new(true)}, {addr: "fd00:11::2", hostname: "hello-ss-1", ready: new(true)}},
		clusterB + "/IPv4": {{addr: "10.12.0.1", hostname: "hello-ss-0", ready: new(true)}, {addr: "10.12.0.2", hostname: "hello-ss-1", ready: new(true)},
			{addr: "10.12.0.3", hostname: "hello-ss-2", ready: new(false)}},
		clusterB + "/IPv6": {{addr: "fd00:12::1", hostname: "hello-ss-0", ready: new(true)}, {addr: "fd00:12::2", hostname: "hello-ss-1", ready: new(true)},
			{addr: "fd00:12::3", hostname: "hello-ss-2", ready: new(false)}},
	}
	for _, c := range []string{clusterA, clusterB} {
		createMCSSlice(t, client, hlNS, hello, c, discoveryv1.AddressTypeIPv4, slicePorts, pods[c+"/IPv4"]...)
		createMCSSlice(t, client, hlNS, hello, c, discoveryv1.AddressTypeIPv6, slicePorts, pods[c+"/IPv6"]...)
	}
	createImport(t, dyn, importsV1beta1, hlNS, hello, mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.Headless, IPFamilies: families, Ports: ports,
	}, ready)

	servers := []struct {
		name      string
		reference bool // CoreDNS: its failures are logged, not failed
		start     func() string
	}{
		{"serve", false, func() string { return startServe(t, cp.Kubeconfig()).DNS }},
		{"coredns-1.15", true, func() string { return startCoreDNS(t, corednsBin(t), cp.Kubeconfig()) }},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			c := conformance{addr: srv.start(), reference: srv.reference, ipNS: ipNS, hlNS: hlNS,
				setIPs: setIPs, localIPs: local.Spec.ClusterIPs, families: families, pods: pods}
			c.run(t)
		})
	}
}

// conformance is the suite's DNS checks against one server.
type conformance struct {
	addr       string
	reference  bool
	ipNS, hlNS string
	setIPs     []string
	localIPs   []string
	families   []corev1.IPFamily
	pods       map[string][]endpoint
	bound      time.Duration
}

func (c *conformance) name(ns, zone string) string { return hello + "." + ns + ".svc." + zone + "." }

// fail reports a failed check: an error, or for the reference a log line.
func (c *conformance) fail(t *testing.T, err error) {
	t.Helper()
	if c.reference {
		t.Logf("reference fails the check: %v", err)
		return
	}
	t.Error(err)
}

func (c *conformance) check(t *testing.T, qname string, qtype uint16, want []string) {
	t.Helper()
	slices.Sort(want)
	var got answer
	err := waitFor(c.bound, func() error {
		got = addresses(c.addr, qname, qtype)
		if got.rcode != dns.RcodeSuccess || !slices.Equal(got.values, want) {
			return fmt.Errorf("%s %s: got %s, want NOERROR %v", qname, dns.TypeToString[qtype], got, want)
		}
		return nil
	})
	if err != nil {
		c.fail(t, err)
	}
}

func (c *conformance) checkRcode(t *testing.T, qname string, qtype uint16, rcode int) {
	t.Helper()
	if err := waitFor(c.bound, func() error {
		if got := addresses(c.addr, qname, qtype); got.rcode != rcode || got.err != nil {
			return fmt.Errorf("%s %s: got %s, want %s", qname, dns.TypeToString[qtype], got, dns.RcodeToString[rcode])
		}
		return nil
	}); err != nil {
		c.fail(t, err)
	}
}

func (c *conformance) run(t *testing.T) {
	// The server has the objects once it answers the last one written.
	c.bound = followBound
	start := time.Now()
	defer func() {
		t.Logf("answered the headless import %v after it started answering", time.Since(start).Round(time.Millisecond))
	}()
	if err := waitFor(startBound, func() error {
		got := addresses(c.addr, c.name(c.hlNS, clustersetZone), dns.TypeA)
		if got.rcode != dns.RcodeSuccess || len(got.values) == 0 {
			return fmt.Errorf("%s A: %s", c.name(c.hlNS, clustersetZone), got)
		}
		return nil
	}); err != nil {
		c.fail(t, fmt.Errorf("never answered the headless import: %v; every check asked once", err))
		c.bound = 0
	}
	qtypes := map[corev1.IPFamily]uint16{corev1.IPv4Protocol: dns.TypeA, corev1.IPv6Protocol: dns.TypeAAAA}
	familyOf := func(ip string) corev1.IPFamily {
		if strings.Contains(ip, ":") {
			return corev1.IPv6Protocol
		}
		return corev1.IPv4Protocol
	}
	ready := func(e endpoint) bool { return e.ready == nil || *e.ready }
	setName, hlName := c.name(c.ipNS, clustersetZone), c.name(c.hlNS, clustersetZone)

	t.Run("ClusterSetIP/A and AAAA are the clusterset IPs", func(t *testing.T) {
		for _, ip := range c.setIPs {
			c.check(t, setName, qtypes[familyOf(ip)], []string{ip})
		}
	})
	t.Run("ClusterSetIP/SRV is one record of the port, target the service", func(t *testing.T) {
		c.check(t, setName, dns.TypeSRV, []string{"42 " + setName})
	})
	t.Run("ClusterSetIP/cluster.local resolves the local Service only", func(t *testing.T) {
		c.check(t, c.name(c.ipNS, clusterZone), dns.TypeA, c.localIPs)
		c.check(t, c.name(c.ipNS, clusterZone), dns.TypeAAAA, nil)
	})
	t.Run("Headless/A and AAAA are the ready endpoints of every cluster", func(t *testing.T) {
		for _, f := range c.families {
			var want []string
			for _, cl := range []string{clusterA, clusterB} {
				for _, e := range c.pods[cl+"/"+string(f)] {
					if ready(e) {
						want = append(want, e.addr)
					}
				}
			}
			c.check(t, hlName, qtypes[f], want)
		}
	})
	t.Run("Headless/hostname.clusterid is the pod's address", func(t *testing.T) {
		for _, cl := range []string{clusterA, clusterB} {
			for _, f := range c.families {
				for _, e := range c.pods[cl+"/"+string(f)] {
					qname := e.hostname + "." + cl + "." + hlName
					if !ready(e) {
						// Not in the suite: a pod that is not ready has no
						// name (NXDOMAIN).
						c.checkRcode(t, qname, qtypes[f], dns.RcodeNameError)
						continue
					}
					c.check(t, qname, qtypes[f], []string{e.addr})
				}
			}
		}
	})
	t.Run("Headless/SRV is one record per endpoint, target its hostname", func(t *testing.T) {
		// A pod's IPv4 and IPv6 endpoints share its hostname, hence its
		// SRV target: one record per pod.
		var want []string
		for _, cl := range []string{clusterA, clusterB} {
			for _, e := range c.pods[cl+"/IPv4"] {
				if ready(e) {
					want = append(want, "42 "+e.hostname+"."+cl+"."+hlName)
				}
			}
		}
		c.check(t, hlName, dns.TypeSRV, want)
	})
}

// answer is the rcode and the values of the answer records of the asked
// type: addresses, or "port target" for SRV, sorted.
type answer struct {
	rcode  int
	values []string
	err    error
}

func (a answer) String() string {
	if a.err != nil {
		return "error: " + a.err.Error()
	}
	return fmt.Sprintf("%s %v", dns.RcodeToString[a.rcode], a.values)
}

// addresses asks over UDP, then over TCP if the reply was truncated.
func addresses(addr, name string, qtype uint16) answer {
	r, err := testkit.Exchange("udp", addr, name, qtype)
	if err == nil && r.Truncated {
		r, err = testkit.Exchange("tcp", addr, name, qtype)
	}
	if err != nil {
		return answer{err: err}
	}
	a := answer{rcode: r.Rcode}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype != qtype || !strings.EqualFold(rr.Header().Name, name) {
			a.values = append(a.values, "unexpected "+rr.String())
			continue
		}
		switch rr := rr.(type) {
		case *dns.A:
			a.values = append(a.values, rr.A.String())
		case *dns.AAAA:
			a.values = append(a.values, rr.AAAA.String())
		case *dns.SRV:
			a.values = append(a.values, fmt.Sprintf("%d %s", rr.Port, rr.Target))
		}
	}
	slices.Sort(a.values)
	return a
}

// waitFor polls cond every 100ms until it returns nil or bound passes,
// and returns its last error. It asks at least once.
func waitFor(bound time.Duration, cond func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
