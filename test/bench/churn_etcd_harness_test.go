package bench

// Tests of populateDirect. The first ones run without DNSCONFIGURER_BENCH,
// against a fake etcd that decodes what it is given into client-go's fake
// clientset; TestDirectObjects and TestDirectPopulate need it and a real
// kube-apiserver and etcd (test/apiserver).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestDirectIPs(t *testing.T) {
	p := netip.MustParsePrefix(churnServiceCIDR)
	ips, err := directIPs(p, staticBand, 5000)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := directIPs(p, staticBand, 5000)
	if !slices.Equal(ips, again) {
		t.Error("two calls differ, want a fixed seed")
	}
	low := netip.MustParseAddr("10.96.1.0") // the first above the static band
	last := netip.MustParseAddr("10.111.255.255")
	seen := map[string]bool{}
	var inLastHalf int
	for _, s := range ips {
		a := netip.MustParseAddr(s)
		if !p.Contains(a) || a.Less(low) || a == last || seen[s] {
			t.Fatalf("address %s: outside %s, in its static band, its last, or twice", s, p)
		}
		seen[s] = true
		if !a.Less(netip.MustParseAddr("10.104.0.0")) {
			inLastHalf++
		}
	}
	if inLastHalf < 2000 || inLastHalf > 3000 {
		t.Errorf("%d of 5000 in the upper half of the range, want them spread", inLastHalf)
	}

	// A /28 above its first two addresses: .2 to .14, all of them.
	small, err := directIPs(netip.MustParsePrefix("10.96.0.0/28"), 2, 13)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(small, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	if small[0] != "10.96.0.2" || small[12] != "10.96.0.14" {
		t.Errorf("got %v, want 10.96.0.2 … 10.96.0.14", small)
	}
	if _, err := directIPs(netip.MustParsePrefix("10.96.0.0/28"), 2, 14); err == nil {
		t.Error("14 addresses from 13: no error")
	}
	if _, err := directIPs(netip.MustParsePrefix("fd00::/112"), 0, 1); err == nil {
		t.Error("an IPv6 prefix: no error")
	}
}

func TestStorageKV(t *testing.T) {
	created := metav1.Now().Rfc3339Copy()
	for _, c := range []struct {
		obj     runtime.Object
		key     string
		gvk     schema.GroupVersionKind
		wantErr bool
	}{
		{obj: directService("svc-1", "churn-1", "10.97.0.1", servicePort, created), key: "/registry/services/specs/churn-1/svc-1",
			gvk: corev1.SchemeGroupVersion.WithKind("Service")},
		{obj: directSlice("hl-1", "churn-1", 1, created), key: "/registry/endpointslices/churn-1/hl-1-1",
			gvk: discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")},
		{obj: directIPAddress("10.97.0.1", "churn-1", "svc-1", created), key: "/registry/ipaddresses/10.97.0.1",
			gvk: networkingv1.SchemeGroupVersion.WithKind("IPAddress")},
		{obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n"}}, wantErr: true},
	} {
		kv, err := storageKV(c.obj)
		if c.wantErr {
			if err == nil {
				t.Errorf("%T: no error", c.obj)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if kv.key != c.key {
			t.Errorf("key %s, want %s", kv.key, c.key)
		}
		// kube-apiserver's storage form: the protobuf magic, then a
		// runtime.Unknown.
		if !bytes.HasPrefix(kv.value, []byte("k8s\x00")) {
			t.Errorf("%s: value starts %q, want the protobuf prefix", kv.key, kv.value[:8])
		}
		got, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(kv.value, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", kv.key, err)
		}
		if *gvk != c.gvk {
			t.Errorf("%s: decoded as %v, want %v", kv.key, gvk, c.gvk)
		}
		got.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		if !apiequality.Semantic.DeepEqual(got, c.obj) {
			t.Errorf("%s: decoded %s\nwant %s", kv.key, asJSON(got), asJSON(c.obj))
		}
	}
}

// fakeEtcd is a kvWriter that decodes what it is given and adds it to a
// fake clientset, so that the API reads of populateDirect see it.
type fakeEtcd struct {
	t      *testing.T
	client *fake.Clientset
	mu     sync.Mutex
	rev    int64
	txns   int
	revs   map[string]int64 // by key
}

func (f *fakeEtcd) create(_ context.Context, kvs []keyValue) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(kvs) > txnOps {
		f.t.Errorf("a transaction of %d keys, etcd takes %d", len(kvs), txnOps)
	}
	f.rev++
	f.txns++
	for _, kv := range kvs {
		if _, ok := f.revs[kv.key]; ok {
			return 0, fmt.Errorf("%s exists", kv.key)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(kv.value, nil, nil)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", kv.key, err)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return 0, err
		}
		if m.GetUID() == "" || m.GetCreationTimestamp().Time.IsZero() || m.GetResourceVersion() != "" {
			f.t.Errorf("%s: uid %q, created %v, resourceVersion %q", kv.key, m.GetUID(), m.GetCreationTimestamp(), m.GetResourceVersion())
		}
		if want, _ := storageKV(obj); want.key != kv.key {
			f.t.Errorf("object of %s stored at %s", want.key, kv.key)
		}
		m.SetResourceVersion(fmt.Sprint(f.rev))
		if err := f.client.Tracker().Add(obj); err != nil {
			return 0, err
		}
		f.revs[kv.key] = f.rev
	}
	return f.rev, nil
}

func TestPopulateDirect(t *testing.T) {
	client := fake.NewClientset()
	w := &fakeEtcd{t: t, client: client, revs: map[string]int64{}}
	set := churnSettings{services: 250, headless: 70}
	c, st, err := populateDirect(t.Context(), client, w, set, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if c.namespaces != 4 || !st.direct || st.servedServices != 320 || st.servedSlices != 70 {
		t.Errorf("%d namespaces, stats %+v; want 4 namespaces, 320 Services and 70 slices served", c.namespaces, st)
	}
	// 64 Services (and their IPAddress) or 64 headless Services (and
	// their slice) a transaction.
	if w.txns != 4+2 {
		t.Errorf("%d transactions, want 6", w.txns)
	}
	if _, err := client.CoreV1().Namespaces().Get(t.Context(), "churn-3", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace churn-3 not created through the API: %v", err)
	}
	ips := map[string]bool{}
	for i, e := range c.services {
		name, ns := fmt.Sprintf("svc-%d", i), fmt.Sprintf("churn-%d", i%4)
		if e.qname != serviceName(name, ns) {
			t.Fatalf("service %d is %s", i, e.qname)
		}
		svc, err := client.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip := svc.Spec.ClusterIP
		if !slices.Equal(e.want, []string{ip}) || !slices.Equal(svc.Spec.ClusterIPs, []string{ip}) || ips[ip] {
			t.Fatalf("service %d: want %v, stored %s %v (seen before: %v)", i, e.want, ip, svc.Spec.ClusterIPs, ips[ip])
		}
		ips[ip] = true
		a, err := client.NetworkingV1().IPAddresses().Get(t.Context(), ip, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
		if r := a.Spec.ParentRef; r == nil || r.Resource != "services" || r.Namespace != ns || r.Name != name {
			t.Errorf("IPAddress %s belongs to %+v", ip, r)
		}
	}
	for i, h := range c.headless {
		name, ns := fmt.Sprintf("hl-%d", i), fmt.Sprintf("churn-%d", i%4)
		svc, err := client.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Fatalf("headless %d: %v, cluster IP %q", i, err, svc.Spec.ClusterIP)
		}
		if h.qname != serviceName(name, ns) || h.slice.Name != name+"-1" || h.slice.Labels[discoveryv1.LabelServiceName] != name {
			t.Errorf("headless %d: %s, slice %s of %q", i, h.qname, h.slice.Name, h.slice.Labels[discoveryv1.LabelServiceName])
		}
		// The churn updates the slice with this resourceVersion: the
		// revision of its transaction.
		if want := fmt.Sprint(w.revs["/registry/endpointslices/"+ns+"/"+name+"-1"]); h.slice.ResourceVersion != want {
			t.Errorf("slice %s: resourceVersion %q, written at %s", h.slice.Name, h.slice.ResourceVersion, want)
		}
		if got := sliceAddrs(h.slice); len(got) != endpointsPerSlice || !slices.Contains(got, endpointAddr(uint32(i*endpointsPerSlice))) {
			t.Errorf("slice %s: %v", h.slice.Name, got)
		}
	}
	if n := c.nextAddr.Load(); n != 70*endpointsPerSlice {
		t.Errorf("next endpoint address %d, want %d", n, 70*endpointsPerSlice)
	}
	if s := st.String(); !strings.Contains(s, "straight into etcd") || !strings.Contains(s, "320 Services, 70 EndpointSlices") {
		t.Errorf("stats read %q", s)
	}

	// A Service the API server no longer has fails the check.
	if err := client.CoreV1().Services("churn-1").Delete(t.Context(), "svc-5", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.checkServed(t.Context(), client); err == nil || !strings.Contains(err.Error(), "1 services written but not listed") {
		t.Errorf("check with svc-5 gone: %v", err)
	}
	// A transaction that fails fails populate.
	if _, _, err := populateDirect(t.Context(), client, w, churnSettings{services: 3}, t.Logf); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("populating the same objects again: %v", err)
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// storedObject reads key from etcd and decodes it, without its type meta.
func storedObject(t *testing.T, w etcdWriter, key string) runtime.Object {
	t.Helper()
	resp, err := w.kv.Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	if v := resp.Kvs[0].Value; !bytes.HasPrefix(v, []byte("k8s\x00")) {
		t.Fatalf("%s: stored as %q…, want protobuf", key, v[:min(len(v), 8)])
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(resp.Kvs[0].Value, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj
}

// sansIdentity clears what differs between two creates of the same
// object: uid and times.
func sansIdentity(t *testing.T, obj runtime.Object) runtime.Object {
	t.Helper()
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	m.SetUID("")
	m.SetCreationTimestamp(metav1.Time{})
	mf := m.GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	m.SetManagedFields(mf)
	return obj
}

// TestDirectObjects checks that the objects populateDirect writes are
// those kube-apiserver stores for the same creates, and that its ClusterIP
// allocator does not give a directly written address to a new Service.
func TestDirectObjects(t *testing.T) {
	requireBench(t)
	// 14 addresses: "kubernetes" has 10.96.0.1.
	cp := apiserver.StartT(t, apiserver.WithAPIServerArgs("--service-cluster-ip-range=10.96.0.0/28"))
	ctx := t.Context()
	client := cp.Client()
	w := dialEtcd(t, cp.EtcdURL())
	c, _, err := populate(ctx, client, churnSettings{services: 1, headless: 1}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ip := c.services[0].want[0]
	created := metav1.Now().Rfc3339Copy()
	for _, d := range []runtime.Object{
		directService("svc-0", "churn-0", ip, servicePort, created),
		directIPAddress(ip, "churn-0", "svc-0", created),
		directService("hl-0", "churn-0", corev1.ClusterIPNone, headlessPort, created),
		directSlice("hl-0", "churn-0", 0, created),
	} {
		kv, err := storageKV(d)
		if err != nil {
			t.Fatal(err)
		}
		stored := sansIdentity(t, storedObject(t, w, kv.key))
		if d := sansIdentity(t, d); !apiequality.Semantic.DeepEqual(stored, d) {
			t.Errorf("%s: kube-apiserver stored\n%s\npopulateDirect writes\n%s", kv.key, asJSON(stored), asJSON(d))
		}
	}

	// Every other address of the range, written directly with its
	// IPAddress: none is left for the API server to allocate.
	var free []string
	for _, a := range []string{"10.96.0.2", "10.96.0.3", "10.96.0.4", "10.96.0.5", "10.96.0.6", "10.96.0.7", "10.96.0.8",
		"10.96.0.9", "10.96.0.10", "10.96.0.11", "10.96.0.12", "10.96.0.13", "10.96.0.14"} {
		if a != ip {
			free = append(free, a)
		}
	}
	fill := func(i int) []runtime.Object {
		name := fmt.Sprintf("fill-%d", i)
		return []runtime.Object{directService(name, "churn-0", free[i], servicePort, created), directIPAddress(free[i], "churn-0", name, created)}
	}
	if err := putItems(ctx, w, len(free), 2, fill, func(int, []runtime.Object, int64) {}); err != nil {
		t.Fatal(err)
	}
	if err := putItems(ctx, w, 1, 2, fill, func(int, []runtime.Object, int64) {}); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("writing fill-0 again: %v, want the transaction refused", err)
	}
	got, err := client.CoreV1().Services("churn-0").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "new-0"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: servicePort}}},
	}, metav1.CreateOptions{})
	if err == nil {
		t.Errorf("a Service created with every address written directly: got %s", got.Spec.ClusterIP)
	} else {
		t.Logf("create with the range full: %v", err)
	}
}

// TestDirectPopulate runs populateDirect against a real API server and
// then the churn's writes through it: new Services get addresses not
// written directly, and slices written directly take updates.
func TestDirectPopulate(t *testing.T) {
	requireBench(t)
	cp := apiserver.StartT(t, apiserver.WithAPIServerArgs("--service-cluster-ip-range="+churnServiceCIDR))
	ctx := t.Context()
	client := cp.Client()
	c, st, err := populateDirect(ctx, client, dialEtcd(t, cp.EtcdURL()), churnSettings{services: 1000, headless: 10}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(st)
	direct := map[string]bool{}
	for _, e := range c.services {
		direct[e.want[0]] = true
	}
	create, move := c.lanes(client)[0], c.lanes(client)[1]
	for range 20 {
		ch, err := create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if direct[ch.want[0]] {
			t.Errorf("%s got %s, an address written directly", ch.qname, ch.want[0])
		}
	}
	for range 2 * len(c.headless) {
		ch, err := move(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ch.kind != kindEndpoint {
			t.Fatalf("change %+v, want a moved endpoint", ch)
		}
		ch.done()
	}
}
