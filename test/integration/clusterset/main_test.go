// Package clusterset_test proves the Multi-Cluster Services zone (KEP-1645,
// issue 70) of `dnsconfigurer serve --clusterset-zone clusterset.local`
// against a real kube-apiserver and etcd (test/apiserver) with the mcs-api
// CRDs of sigs.k8s.io/mcs-api installed (v1alpha1 and v1beta1 served,
// v1beta1 stored). The tests play the MCS controller: they write
// ServiceImports and the EndpointSlices an implementation imports, labelled
// multicluster.kubernetes.io/service-name and
// multicluster.kubernetes.io/source-cluster, and ask real DNS questions over
// UDP on 127.0.0.1.
//
//   - TestSideBySideCoreDNS runs CoreDNS 1.15 (`kubernetes ... { multicluster
//     clusterset.local }`) and serve on the same API server and compares every
//     answer of the specification's table, TTLs included.
//   - TestConformanceDNS runs the DNS checks of the mcs-api conformance suite
//     (ClusterSetIP and headless imports, two source clusters) against serve.
//
// They need the kube-apiserver, etcd and coredns binaries of
// test/testbin/build.sh and skip without them:
//
//	DNSCONFIGURER_TESTBIN=$(test/testbin/build.sh) go test -v ./test/integration/clusterset/
package clusterset_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

var controlPlane *apiserver.ControlPlane

func TestMain(m *testing.M) {
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	code := apiserver.RunTests(m, &controlPlane)
	buildbin.Remove()
	os.Exit(code)
}

const (
	clusterZone    = "cluster.local"
	clustersetZone = "clusterset.local"
	// startBound is how long a server gets to start and sync, and an
	// answer to follow a write: the API server, the watches and a loaded
	// two-core machine.
	startBound = 90 * time.Second
	// settleBound is how long serve's answers get to reach CoreDNS's once
	// CoreDNS answers the last object written (both watch the same API
	// server); after it the differences are reported.
	settleBound = 30 * time.Second
)

var (
	// importsV1alpha1 and importsV1beta1 are the ServiceImports of the two
	// versions the CRD serves.
	importsV1alpha1 = schema.GroupVersionResource{Group: mcsv1beta1.GroupName, Version: "v1alpha1", Resource: "serviceimports"}
	importsV1beta1  = schema.GroupVersionResource{Group: mcsv1beta1.GroupName, Version: "v1beta1", Resource: "serviceimports"}
)

// installOnce installs the CRDs once per control plane.
var installOnce sync.Once

// installCRDs creates the ServiceImport and ServiceExport CRDs of mcs-api
// v0.5.2 (v1alpha1 and v1beta1 served, v1beta1 the storage version) and
// waits until both versions of serviceimports can be listed.
func installCRDs(t *testing.T) {
	t.Helper()
	var err error
	installOnce.Do(func() {
		ctx, cancel := context.WithTimeout(t.Context(), startBound)
		defer cancel()
		err = apiserver.InstallMCSCRDs(ctx, controlPlane.Config())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// storageVersion is the storage version of the serviceimports CRD.
func storageVersion(t *testing.T, dyn dynamic.Interface) string {
	t.Helper()
	u, err := dyn.Resource(apiserver.CRDs).Get(t.Context(), "serviceimports."+mcsv1beta1.GroupName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["storage"] == true {
			return fmt.Sprint(m["name"])
		}
	}
	return ""
}

// clients are the admin clients of the control plane.
func clients(t *testing.T, cp *apiserver.ControlPlane) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	return apiserver.NewClient(t, cp.Config()), dyn
}

// createImport writes a ServiceImport of version gvr (v1alpha1 or v1beta1:
// the same fields in mcs-api v0.5.2) as an MCS controller does; status, if
// given, through the status subresource.
func createImport(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string,
	spec mcsv1beta1.ServiceImportSpec, status *mcsv1beta1.ServiceImportStatus) {
	t.Helper()
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(si)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind("ServiceImport")
	unstructured.RemoveNestedField(u.Object, "status")
	created, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s ServiceImport %s/%s: %v", gvr.Version, ns, name, err)
	}
	if status == nil {
		return
	}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = st
	if _, err := dyn.Resource(gvr).Namespace(ns).UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of ServiceImport %s/%s: %v", ns, name, err)
	}
}

// endpoint is one endpoint of an MCS EndpointSlice.
type endpoint struct {
	addr     string
	hostname string // "" for none
	ready    *bool  // nil: unset (ready, by the EndpointSlice API)
}

// createMCSSlice writes the EndpointSlice an MCS controller imports for the
// service's endpoints in cluster: labelled with the service and the source
// cluster, managed by the controller, not by the EndpointSlice controller.
func createMCSSlice(t *testing.T, client kubernetes.Interface, ns, service, cluster string, family discoveryv1.AddressType,
	ports []discoveryv1.EndpointPort, eps ...endpoint) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: service + "-" + cluster + "-",
			Labels: map[string]string{
				mcsv1beta1.LabelServiceName:               service,
				mcsv1beta1.LabelSourceCluster:             cluster,
				discoveryv1.LabelManagedBy:                "mcs-controller.test.dnsconfigurer.io",
				"multicluster.kubernetes.io/test-harness": "clusterset",
			},
		},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.hostname != "" {
			ep.Hostname = new(e.hostname)
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create EndpointSlice of %s/%s from %s: %v", ns, service, cluster, err)
	}
}

// createService writes a Service of the local cluster.
func createService(t *testing.T, client kubernetes.Interface, ns, name string, spec corev1.ServiceSpec) *corev1.Service {
	t.Helper()
	svc, err := client.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s/%s: %v", ns, name, err)
	}
	return svc
}

// createLocalSlice writes the EndpointSlice the EndpointSlice controller
// would write for a local Service.
func createLocalSlice(t *testing.T, client kubernetes.Interface, ns, service string, ports []discoveryv1.EndpointPort, eps ...endpoint) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: service + "-", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.hostname != "" {
			ep.Hostname = new(e.hostname)
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create EndpointSlice of %s/%s: %v", ns, service, err)
	}
}

func port(name string, p int32, proto corev1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: new(name), Port: new(p), Protocol: new(proto)}
}

// startServe runs `dnsconfigurer serve --kubeconfig KUBECONFIG
// --clusterset-zone clusterset.local` on 127.0.0.1 and waits for /readyz.
// Names outside its zones go to a port nothing answers: none is asked.
// It logs how long serve took to be ready.
func startServe(t *testing.T, kubeconfig string) *buildbin.Serve {
	t.Helper()
	buildbin.Dnsconfigurer(t) // built first: the start is timed
	start := time.Now()
	s := buildbin.StartServeArgs(t, "127.0.0.1:0", "--kubeconfig", kubeconfig,
		"--clusterset-zone", clustersetZone, "--upstream", "127.0.0.1:9")
	testkit.WaitFor(t, startBound, func() error {
		if s.HasExited() {
			t.Fatalf("serve exited:\n%s", s.Output.String())
		}
		return testkit.GetOK(nil, "http://"+s.Metrics+"/readyz")
	})
	t.Logf("serve ready (/readyz 200) %v after its start", time.Since(start).Round(time.Millisecond))
	return s
}

// corednsBin is $DNSCONFIGURER_TESTBIN/coredns; the test skips without it.
func corednsBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(os.Getenv(apiserver.EnvBinDir), "coredns")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no coredns in $%s: %v", apiserver.EnvBinDir, err)
	}
	return bin
}

// corefile is the Corefile CoreDNS runs: the kubernetes plugin of
// kubeadm's Corefile with the multicluster option, as Cilium's and the
// mcs-api guides add it. The plugin must be authoritative for the
// multicluster zone (setup.go: "is not authoritative for the multicluster
// zone"), so clusterset.local is one of its zones. TTL and pods are the
// defaults of both servers (5, disabled).
func corefile(addr, kubeconfig string) string {
	host, p, _ := net.SplitHostPort(addr)
	return fmt.Sprintf(`.:%s {
    bind %s
    errors
    kubernetes %s %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        multicluster %s
    }
}
`, p, host, clusterZone, clustersetZone, kubeconfig, clustersetZone)
}

// startCoreDNS runs CoreDNS 1.15 on a free 127.0.0.1 port and waits until
// it answers (its cache synced, or its 5s startup_timeout passed).
func startCoreDNS(t *testing.T, bin, kubeconfig string) string {
	t.Helper()
	addr := freeAddr(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "Corefile")
	text := corefile(addr, kubeconfig)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-conf", path)
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("coredns output:\n%s\nCorefile:\n%s", out.String(), text)
		}
	})
	testkit.WaitFor(t, startBound, func() error {
		if testkit.Closed(exited) {
			t.Fatalf("coredns exited:\n%s\nCorefile:\n%s", out.String(), text)
		}
		r, err := testkit.Exchange("udp", addr, "dns-version."+clusterZone+".", dns.TypeTXT)
		if err != nil || r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("coredns at %s not answering yet: %v", addr, err)
		}
		return nil
	})
	return addr
}

// freeAddr is a 127.0.0.1 address whose UDP and TCP ports were free.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := pc.LocalAddr().String()
		ln, err := net.Listen("tcp", addr)
		pc.Close()
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free 127.0.0.1 port for UDP and TCP")
	return ""
}

// reply is the part of a DNS reply both servers are compared on.
type reply struct {
	rcode                     int
	aa, tc                    bool
	answer, authority, extras []string
	err                       error
}

// ask sends one question over UDP, without EDNS (as glibc and musl
// ask), and keeps the reply's rcode, AA and TC flags and its three
// sections (over TCP when the UDP reply was truncated), each record as text with
// the test namespace written <ns>, sorted. The SOA serial is 0: each
// server numbers its own changes (CoreDNS: the Unix time of the last
// change it saw, kubernetes.go Serial).
func ask(addr, ns, name string, qtype uint16) reply {
	r, err := testkit.Exchange("udp", addr, name, qtype)
	if err != nil {
		return reply{err: err}
	}
	tc := r.Truncated
	if tc {
		// What a truncated reply keeps depends on the order of the
		// records, which both servers rotate: the whole answer over TCP
		// is compared instead, with the UDP reply's TC flag.
		if r, err = testkit.Exchange("tcp", addr, name, qtype); err != nil {
			return reply{err: err}
		}
	}
	text := func(rrs []dns.RR) []string {
		var out []string
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			rr = dns.Copy(rr)
			if soa, ok := rr.(*dns.SOA); ok {
				soa.Serial = 0
			}
			s := strings.Join(strings.Fields(rr.String()), " ")
			s = strings.ReplaceAll(" "+s, " "+ns+".", " <ns>.")
			out = append(out, strings.TrimPrefix(strings.ReplaceAll(s, "."+ns+".", ".<ns>."), " "))
		}
		slices.Sort(out)
		return out
	}
	return reply{rcode: r.Rcode, aa: r.Authoritative, tc: tc, answer: text(r.Answer), authority: text(r.Ns), extras: text(r.Extra)}
}

func (r reply) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	var b strings.Builder
	b.WriteString(dns.RcodeToString[r.rcode])
	if r.aa {
		b.WriteString(" aa")
	}
	if r.tc {
		b.WriteString(" tc")
	}
	section := func(name string, rrs []string) {
		if len(rrs) > 0 {
			fmt.Fprintf(&b, " | %s: %s", name, strings.Join(rrs, "; "))
		}
	}
	section("ans", r.answer)
	section("auth", r.authority)
	section("add", r.extras)
	return b.String()
}

func (r reply) equal(o reply) bool {
	return r.err == nil && o.err == nil && r.String() == o.String()
}

// question is one DNS question; name may hold <ns> for the test namespace.
type question struct {
	name  string
	qtype uint16
}

func (q question) String() string { return q.name + " " + dns.TypeToString[q.qtype] }

func (q question) fqdn(ns string) string {
	return dns.Fqdn(strings.ReplaceAll(q.name, "<ns>", ns))
}

// svcName is name.<ns>.svc.zone.
func svcName(name, zone string) string { return name + ".<ns>.svc." + zone + "." }
