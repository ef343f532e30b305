package kubefeed

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

func newStore(t *testing.T, opts store.Options) *store.Store {
	t.Helper()
	opts.Zone = "cluster.local"
	opts.TTL = 5
	st, err := store.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func addrs(st *store.Store, name string) []string {
	snap := st.Snapshot()
	if snap == nil {
		return nil
	}
	n, ok := snap.Lookup(name)
	if !ok {
		return nil
	}
	var out []string
	for _, a := range append(append([]netip.Addr(nil), n.A()...), n.AAAA()...) {
		out = append(out, a.String())
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestClusterFeed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", Annotations: map[string]string{"big": strings.Repeat("x", 1000)}},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00::10"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "prod", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.1.0.1"}, Hostname: ptr("db-0")},
				{Addresses: []string{"10.1.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}},
			}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.9", PodIPs: []corev1.PodIP{{IP: "10.1.0.9"}}}},
	)
	st := newStore(t, store.Options{Pods: store.PodsVerified})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Cluster{Client: client, Store: st, Pods: true}).Run(ctx)
	}()

	testkit.WaitEqual(t, 10*time.Second, "first sync", func() bool { return st.Snapshot() != nil }, true)
	cases := []struct {
		name string
		want []string
	}{
		{"web.prod.svc.cluster.local.", []string{"10.96.0.10", "fd00::10"}},
		{"db.prod.svc.cluster.local.", []string{"10.1.0.1"}},
		{"db-0.db.prod.svc.cluster.local.", []string{"10.1.0.1"}},
		{"10-1-0-9.prod.pod.cluster.local.", []string{"10.1.0.9"}},
	}
	for _, tc := range cases {
		t.Run("initial "+tc.name, func(t *testing.T) {
			if got := addrs(st, tc.name); !slices.Equal(got, tc.want) {
				t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
			}
		})
	}

	// Updates arrive through the watch.
	cs := client.CoreV1()
	if _, err := cs.Services("prod").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "prod"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.30"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "new service", func() bool { return slices.Equal(addrs(st, "new.prod.svc.cluster.local."), []string{"10.96.0.30"}) }, true)

	sl, _ := client.DiscoveryV1().EndpointSlices("prod").Get(ctx, "db-1", metav1.GetOptions{})
	sl.Endpoints[1].Conditions.Ready = ptr(true)
	if _, err := client.DiscoveryV1().EndpointSlices("prod").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "endpoint ready", func() bool {
		return slices.Equal(addrs(st, "db.prod.svc.cluster.local."), []string{"10.1.0.1", "10.1.0.2"})
	}, true)

	if err := cs.Services("prod").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "web deleted", func() bool {
		_, ok := st.Snapshot().Lookup("web.prod.svc.cluster.local.")
		return !ok
	}, true)

	p, _ := cs.Pods("prod").Get(ctx, "p", metav1.GetOptions{})
	p.Status.Phase = corev1.PodSucceeded
	if _, err := cs.Pods("prod").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "finished pod dropped", func() bool { return addrs(st, "10-1-0-9.prod.pod.cluster.local.") == nil }, true)

	if err := cs.Namespaces().Delete(ctx, "prod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "namespace added", func() bool { return st.Snapshot().HasNamespace("fresh") }, true)

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
}

func TestClusterFeedCancelBeforeSync(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := newStore(t, store.Options{})
	err := (&Cluster{Client: fake.NewClientset(), Store: st}).Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if st.Snapshot() != nil {
		t.Errorf("published without a sync")
	}
}

// TestStagedEqualsDirect: a streamed initial list is stored by its watch
// as it arrives, each object passed on as a placeholder, and the Replace
// after its end deletes what it no longer has. The store must then hold
// what the same objects give through a plain list, a bad one skipped (and
// counted) and a dropped pod removed in both.
func TestStagedEqualsDirect(t *testing.T) {
	objs := map[string][]any{
		"services": {
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", Annotations: map[string]string{"x": "y"}},
				Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name", Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.11"}},
		},
		"endpointslices": {
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "prod", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Hostname: ptr("db-0")}, {Addresses: []string{"10.1.0.2"}}}},
		},
		"pods": {
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.9"}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "prod"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded, PodIP: "10.1.0.8"}},
		},
	}
	load := func(staged bool) (*store.Store, float64) {
		st := newStore(t, store.Options{Pods: store.PodsVerified})
		// A record each bad or dropped object replaces, so that its removal shows.
		st.SetService(store.Service{Namespace: "prod", Name: "Bad_Name", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.99")}})
		st.SetPod(store.Pod{Namespace: "prod", Name: "done", IPs: []netip.Addr{netip.MustParseAddr("10.1.0.8")}})
		c := &Cluster{Client: fake.NewClientset(), Store: st, Pods: true}
		skips, reg, _ := newSkips(t, nil)
		kinds, err := c.kinds(sink{ctx: t.Context(), store: st, skips: skips})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kinds {
			ks := &keyedStore{kind: k, notify: func() {}, synced: make(chan struct{}), placeholder: k.example.DeepCopyObject()}
			list := objs[k.name]
			if staged {
				var evs []watch.Event
				for _, obj := range list {
					evs = append(evs, watch.Event{Type: watch.Added, Object: obj.(runtime.Object)})
				}
				list = streamed(t, ks, evs)
				for _, obj := range list {
					if obj != any(ks.placeholder) {
						t.Fatalf("%s: the stream passed on %T, not the placeholder", k.name, obj)
					}
				}
			}
			// The bad service and the dropped pod stay listed: Replace
			// keeps their keys, the set removes them.
			if err := ks.Replace(list, "1"); err != nil {
				t.Fatal(err)
			}
		}
		st.Publish()
		return st, skipCount(t, reg, KindService, ReasonInvalidName)
	}
	dump := func(st *store.Store) []string {
		var out []string
		st.Snapshot().Names(func(name string, _ *store.Node) {
			out = append(out, name+" "+strings.Join(addrs(st, name), ","))
		})
		slices.Sort(out)
		for _, k := range []store.ObjectKind{store.KindService, store.KindEndpointSlice, store.KindPod} {
			keys := slices.Collect(st.Keys(k))
			slices.SortFunc(keys, func(a, b store.Key) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
			out = append(out, fmt.Sprint(k, keys))
		}
		return out
	}
	directStore, directSkips := load(false)
	stagedStore, stagedSkips := load(true)
	direct, staged := dump(directStore), dump(stagedStore)
	if directSkips != 1 || stagedSkips != 1 {
		t.Errorf("Bad_Name counted %v times staged, %v through the watch path; want 1", stagedSkips, directSkips)
	}
	if !slices.Equal(staged, direct) {
		t.Errorf("staged list stored\n%s\nthe watch path stored\n%s", strings.Join(staged, "\n"), strings.Join(direct, "\n"))
	}
	for _, want := range []string{"web.prod.svc.cluster.local. 10.96.0.10", "db-0.db.prod.svc.cluster.local. 10.1.0.1",
		"10-1-0-9.prod.pod.cluster.local. 10.1.0.9"} {
		if !slices.Contains(staged, want) {
			t.Errorf("staged list lacks %q", want)
		}
	}
	for _, gone := range []string{"10.96.0.99", "10-1-0-8."} {
		for _, l := range staged {
			if strings.Contains(l, gone) {
				t.Errorf("staged list kept %q: %s", gone, l)
			}
		}
	}
}

func TestConvertErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"bad cluster ip", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"}, Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.0.0.1", "nope"}}})
			return err
		}(), `service n/s: spec.clusterIPs[1] "nope"`},
		{"empty external name", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}})
			return err
		}(), `service default/s: spec.externalName is empty`},
		{"bad endpoint", func() error {
			_, err := ToEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n"},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"1.2.3.4"}}, {Addresses: []string{"x"}}}})
			return err
		}(), `endpointslice n/e: endpoints[1].addresses[0] "x"`},
		// Names the API server refuses (a manifest is not checked by it)
		// are refused: a 300-byte ExternalName made replies no client
		// could unpack.
		{"external name too long", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: strings.Repeat("abcdefghi.", 30) + "com"}})
			return err
		}(), `service n/s: spec.externalName "abcdefghi.`},
		{"external name label too long", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: strings.Repeat("a", 64) + ".com."}})
			return err
		}(), `longer than 63 bytes`},
		{"external name with a space", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "bad name."}})
			return err
		}(), `service n/s: spec.externalName "bad name": a lowercase RFC 1123 subdomain`},
		{"service name", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web.x", Namespace: "n"}})
			return err
		}(), `service n/web.x: metadata.name "web.x": must not contain dots`},
		{"service namespace", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "N"}})
			return err
		}(), `service N/s: metadata.namespace "N"`},
		{"port name", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "Http.Alt", Port: 81}}}})
			return err
		}(), `service n/s: spec.ports[1].name "Http.Alt"`},
		{"port protocol", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: "QUIC"}}}})
			return err
		}(), `service n/s: spec.ports[0].protocol "QUIC": want TCP, UDP or SCTP`},
		{"endpoint hostname", func() error {
			_, err := ToEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n"},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"1.2.3.4"}, Hostname: ptr("a.b")}}})
			return err
		}(), `endpointslice n/e: endpoints[0].hostname "a.b"`},
		{"endpoint port protocol", func() error {
			_, err := ToEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "n"},
				Ports: []discoveryv1.EndpointPort{{Port: ptr(int32(53)), Protocol: ptr(corev1.Protocol("dns"))}}})
			return err
		}(), `endpointslice n/e: ports[0].protocol "dns"`},
		{"pod namespace", func() error {
			_, _, err := ToPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a.b"}})
			return err
		}(), `pod a.b/p: metadata.namespace "a.b"`},
		{"bad pod ip", func() error {
			_, _, err := ToPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n"}, Status: corev1.PodStatus{PodIP: "1.2.3"}})
			return err
		}(), `pod n/p: status.podIP[0] "1.2.3"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", tc.err, tc.want)
			}
		})
	}
	// Ready: absent and true are ready, false is not.
	sl, err := ToEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Endpoints: []discoveryv1.Endpoint{
		{Addresses: []string{"10.0.0.1"}}, {Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
		{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := []bool{sl.Endpoints[0].Ready, sl.Endpoints[1].Ready, sl.Endpoints[2].Ready}; !slices.Equal(got, []bool{true, true, false}) {
		t.Errorf("ready = %v", got)
	}
	// targetRef.name is not checked by the API server: a name that is not
	// a pod name is not used, a pod name is.
	sl, err = ToEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Endpoints: []discoveryv1.Endpoint{
		{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "not a pod"}},
		{Addresses: []string{"10.0.0.2"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-0"}}}})
	if err != nil || sl.Endpoints[0].PodName != "" || sl.Endpoints[1].PodName != "web-0" {
		t.Errorf("pod names %+v, %v; want none and web-0", sl.Endpoints, err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

const svcA = `apiVersion: v1
kind: Service
metadata: {name: a, namespace: prod}
spec: {clusterIP: 10.96.0.1}
`

// TestServiceNames: a Service name is a DNS-1123 label, as the API server
// accepts since Kubernetes 1.36 (KEP-5311), digits first included; what
// it refuses is refused with ReasonInvalidName.
func TestServiceNames(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"web", true},
		{"1kubernetes", true},
		{"10-96-0-1", true},
		{"0", true},
		{"a-1", true},
		{strings.Repeat("1", 63), true},
		{strings.Repeat("1", 64), false},
		{"-web", false},
		{"web-", false},
		{"Web", false},
		{"web.x", false},
		{"web_x", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1"}})
			if tc.ok {
				if err != nil || svc.Name != tc.name {
					t.Fatalf("ToService(%q) = %+v, %v; want it served", tc.name, svc, err)
				}
				return
			}
			var oe *ObjectError
			if !errors.As(err, &oe) || oe.Field != "metadata.name" || oe.Reason() != ReasonInvalidName || oe.Name != tc.name {
				t.Fatalf("ToService(%q) error %v, want an invalid-name error of metadata.name", tc.name, err)
			}
		})
	}
}

// TestObjectErrorReasons: each error of a converter is an *ObjectError
// whose reason label follows its field.
func TestObjectErrorReasons(t *testing.T) {
	cases := []struct {
		name                string
		err                 error
		kind, field, reason string
	}{
		{"empty service name", func() error { _, err := ToService(&corev1.Service{}); return err }(), KindService, "metadata.name", ReasonInvalidName},
		{"service namespace", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "A"}})
			return err
		}(), KindService, "metadata.namespace", ReasonInvalidName},
		{"service port", func() error {
			_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 0}}}})
			return err
		}(), KindService, "spec.ports[0].port", ReasonInvalidField},
		{"slice address", func() error {
			_, err := ToEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"x"}}}})
			return err
		}(), KindEndpointSlice, "endpoints[0].addresses[0]", ReasonInvalidField},
		{"pod ip", func() error {
			_, _, err := ToPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "x"}}}})
			return err
		}(), KindPod, "status.podIPs[0]", ReasonInvalidField},
		{"namespace name", func() error {
			_, err := ToNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}})
			return err
		}(), KindNamespace, "metadata.name", ReasonInvalidName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var oe *ObjectError
			if !errors.As(tc.err, &oe) || oe.Kind != tc.kind || oe.Field != tc.field || oe.Reason() != tc.reason {
				t.Fatalf("error %v (%+v), want kind %s field %s reason %s", tc.err, oe, tc.kind, tc.field, tc.reason)
			}
		})
	}
}

// skipped is a ManifestError as the tests compare it: file (base name),
// document, item, kind, object, reason.
type skipped struct {
	file        string
	doc         int
	item, kind  string
	object      string // namespace/name, or name
	reason      string
	errContains string
}

func skipsOf(t *testing.T, err error) []skipped {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs ManifestErrors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T), want ManifestErrors", err, err)
	}
	var out []skipped
	for _, e := range errs {
		obj := e.Name
		if e.Namespace != "" {
			obj = e.Namespace + "/" + e.Name
		}
		out = append(out, skipped{file: filepath.Base(e.File), doc: e.Doc, item: e.Item, kind: e.Kind, object: obj, reason: e.Reason, errContains: e.Error()})
	}
	return out
}

func serviceNames(objs store.Objects) []string {
	var out []string
	for _, s := range objs.Services {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// TestLoadManifestsSkips: a document or object that cannot be served is
// skipped, named with its file, document and field, and every other
// object is served; a stream that cannot be split loses the rest of its
// file only.
func TestLoadManifestsSkips(t *testing.T) {
	svcB := strings.NewReplacer("name: a", "name: b", "10.96.0.1", "10.96.0.2").Replace(svcA)
	cases := []struct {
		name    string
		content string
		served  []string // Services, besides a.yaml's prod/a
		skipped []skipped
	}{
		{"digit-first service", strings.Replace(svcA, "name: a", "name: 1kubernetes", 1), []string{"prod/1kubernetes"}, nil},
		{"bad yaml", svcB + "---\nkind: Service\n  bad: [indent\n", []string{"prod/b"},
			[]skipped{{file: "b.yaml", doc: 2, kind: KindDocument, reason: ReasonDecode, errContains: `b.yaml" document 2: parse yaml: yaml: line 2`}}},
		{"unknown field", svcB + "---\n" + strings.Replace(svcA, "clusterIP", "clusterIp", 1), []string{"prod/b"},
			[]skipped{{file: "b.yaml", doc: 2, kind: KindService, object: "prod/a", reason: ReasonDecode, errContains: `unknown field "spec.clusterIp"`}}},
		{"bad ip third doc", svcB + "---\n# comment only\n---\n" + strings.Replace(svcA, "10.96.0.1", "10.96.0.999", 1), []string{"prod/b"},
			[]skipped{{file: "b.yaml", doc: 3, kind: KindService, object: "prod/a", reason: ReasonInvalidField, errContains: `service prod/a: spec.clusterIP[0] "10.96.0.999"`}}},
		{"bad name among good ones", svcB + "---\n" + strings.Replace(svcA, "name: a", "name: Bad_Name", 1) + "---\n" + strings.Replace(svcA, "name: a", "name: c", 1),
			[]string{"prod/b", "prod/c"},
			[]skipped{{file: "b.yaml", doc: 2, kind: KindService, object: "prod/Bad_Name", reason: ReasonInvalidName, errContains: `metadata.name "Bad_Name"`}}},
		{"missing kind", "---\napiVersion: v1\nmetadata: {name: x}\n---\n" + svcB, []string{"prod/b"},
			[]skipped{{file: "b.yaml", doc: 1, kind: KindDocument, reason: ReasonDecode, errContains: "kind is missing"}}},
		{"crlf", strings.ReplaceAll(svcB+"---\n"+strings.Replace(svcA, "clusterIP", "clusterIp", 1), "\n", "\r\n"), []string{"prod/b"},
			[]skipped{{file: "b.yaml", doc: 2, kind: KindService, object: "prod/a", reason: ReasonDecode, errContains: "unknown field"}}},
		// The reader fails on the separator line, while reading document
		// 1: the rest of the file is skipped.
		{"content after separator", svcB + "--- {kind: Service}\n" + svcB, nil,
			[]skipped{{file: "b.yaml", doc: 1, kind: KindDocument, reason: ReasonDecode, errContains: "invalid Yaml document separator: {kind: Service}; the rest of the file is skipped"}}},
		{"slice without service label", "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\naddressType: IPv4\nendpoints: []\n", nil,
			[]skipped{{file: "b.yaml", doc: 1, kind: KindEndpointSlice, object: "default/e", reason: ReasonMissingLabel, errContains: `metadata.labels["kubernetes.io/service-name"] is missing`}}},
		{"list item", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  status: {podIP: bad}\n- " +
			strings.ReplaceAll(strings.TrimSpace(svcB), "\n", "\n  ") + "\n", []string{"prod/b"},
			[]skipped{{file: "b.yaml", doc: 1, item: "items[0]", kind: KindPod, object: "default/p", reason: ReasonInvalidField, errContains: `document 1 items[0]: pod default/p: status.podIP[0] "bad"`}}},
		{"bad namespace", "apiVersion: v1\nkind: Namespace\nmetadata: {name: Prod}\n---\n" + svcB, []string{"prod/b"},
			[]skipped{{file: "b.yaml", doc: 1, kind: KindNamespace, object: "Prod", reason: ReasonInvalidName, errContains: `namespace Prod: metadata.name "Prod"`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.yaml"), svcA)
			writeFile(t, filepath.Join(dir, "b.yaml"), tc.content)
			objs, err := LoadManifests(dir)
			if got, want := serviceNames(objs), append([]string{"prod/a"}, tc.served...); !slices.Equal(got, want) {
				t.Errorf("served %v, want %v", got, want)
			}
			got := skipsOf(t, err)
			if len(got) != len(tc.skipped) {
				t.Fatalf("skipped %+v, want %+v", got, tc.skipped)
			}
			for i, w := range tc.skipped {
				g := got[i]
				if !strings.Contains(g.errContains, w.errContains) {
					t.Errorf("error %q, want it to contain %q", g.errContains, w.errContains)
				}
				g.errContains = w.errContains
				if g != w {
					t.Errorf("skipped %+v, want %+v", g, w)
				}
			}
		})
	}
}

// TestLoadManifestsFiles: a file of a directory that cannot be read is
// skipped with its objects and the other files load; the one file a path
// names, or a path that is not there, cannot be loaded at all.
func TestLoadManifestsFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), svcA)
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxManifestSize+1); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "gone.yaml") // as a ConfigMap's link to a removed key
	if err := os.Symlink(filepath.Join(dir, "..data", "gone.yaml"), dangling); err != nil {
		t.Fatal(err)
	}
	objs, err := LoadManifests(dir)
	if got := serviceNames(objs); !slices.Equal(got, []string{"prod/a"}) {
		t.Errorf("served %v, want prod/a", got)
	}
	want := []skipped{
		{file: "big.yaml", kind: KindFile, reason: ReasonTooLarge, errContains: fmt.Sprintf(`manifest %q: larger than 67108864 bytes`, big)},
		{file: "gone.yaml", kind: KindFile, reason: ReasonUnreadable, errContains: fmt.Sprintf(`manifest %q: open`, dangling)},
	}
	got := skipsOf(t, err)
	if len(got) != len(want) {
		t.Fatalf("skipped %+v, want %+v", got, want)
	}
	for i := range want {
		if !strings.Contains(got[i].errContains, want[i].errContains) {
			t.Errorf("error %q, want %q", got[i].errContains, want[i].errContains)
		}
		got[i].errContains = want[i].errContains
		if got[i] != want[i] {
			t.Errorf("skipped %+v, want %+v", got[i], want[i])
		}
	}

	for _, path := range []string{dangling, filepath.Join(dir, "nope.yaml")} {
		objs, err := LoadManifests(path)
		var errs ManifestErrors
		if err == nil || errors.As(err, &errs) || len(objs.Services) != 0 {
			t.Errorf("LoadManifests(%s) = %v, %v; want a plain error and nothing", filepath.Base(path), serviceNames(objs), err)
		}
	}
}

// TestLoadManifestsDocuments: the tricky splits of a YAML stream.
func TestLoadManifestsDocuments(t *testing.T) {
	svcB := strings.NewReplacer("name: a", "name: b", "10.96.0.1", "10.96.0.2").Replace(svcA)
	tests := []struct {
		name    string
		content string
		want    []string // the Services loaded
	}{
		{"--- inside a block scalar", svcA +
			"---\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n  namespace: prod\n  annotations:\n    note: |\n      one\n      ---\n      two\nspec: {clusterIP: 10.96.0.2}\n",
			[]string{"a", "b"}},
		{"leading ---", "---\n" + svcA, []string{"a"}},
		{"separators with comments", "--- # a\n" + svcA + "--- # b\n" + svcB, []string{"a", "b"}},
		{"crlf", strings.ReplaceAll(svcA+"---\n"+svcB, "\n", "\r\n"), []string{"a", "b"}},
		{"empty documents", "---\n---\n\n---\n# only a comment\n---\nnull\n---\n" + svcA + "---\n---\n" + svcB + "---\n", []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "svc.yaml")
			writeFile(t, path, tc.content)
			objs, err := LoadManifests(path)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range objs.Services {
				got = append(got, s.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("services %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadManifestsKinds(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "all.yml"), "---\n"+svcA+`---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: listed}
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
  status: {phase: Running, podIP: 10.1.0.1}
`)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a manifest")
	objs, err := LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Services) != 1 || len(objs.Namespaces) != 1 || len(objs.Pods) != 1 || objs.Pods[0].Namespace != "default" {
		t.Fatalf("objects = %+v", objs)
	}
}

// newSkips is a Skips logging to the returned buffer, its counter on the
// returned registry, its Events to rec (nil: none).
func newSkips(t *testing.T, rec EventRecorder) (*Skips, *prometheus.Registry, *testkit.Buffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	var logs testkit.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	skips, err := NewSkips(reg, log, rec)
	if err != nil {
		t.Fatal(err)
	}
	return skips, reg, &logs
}

const skippedMetric = "dnsconfigurer_dnsserver_objects_skipped_total"

// skipCount reads objects_skipped_total{kind,reason} from reg.
func skipCount(t *testing.T, reg *prometheus.Registry, kind, reason string) float64 {
	t.Helper()
	return testkit.Gather(t, reg)[testkit.Key(skippedMetric, "kind", kind, "reason", reason)]
}

// TestManifestsReload: a reload serves what loads and skips the rest; a
// skipped document is counted and logged once across reloads, again when
// it breaks again after a fix.
func TestManifestsReload(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	file := filepath.Join(dir, "svc.yaml")
	writeFile(t, file, svcA)
	st := newStore(t, store.Options{})
	skips, reg, logs := newSkips(t, nil)
	m := &Manifests{Path: dir, Store: st, Skips: skips, Debounce: 10 * time.Millisecond}
	run := testkit.Go(t, "Run", m.Run)
	withIP := func(ip string) string { return strings.Replace(svcA, "10.96.0.1", ip, 1) }
	const bad = "---\nkind: Service\nspec: [\n"
	const logged = "skipping a manifest document"
	steps := []struct {
		name    string
		content string
		ip      string  // a's address once reloaded
		count   float64 // document/decode
		logs    int
	}{
		{"first load", svcA, "10.96.0.1", 0, 0},
		{"a bad document, the rest served", withIP("10.96.0.2") + bad, "10.96.0.2", 1, 1},
		{"the same problem again", withIP("10.96.0.3") + bad, "10.96.0.3", 1, 1},
		{"fixed", withIP("10.96.0.4"), "10.96.0.4", 1, 1},
		{"broken again", withIP("10.96.0.5") + bad, "10.96.0.5", 2, 2},
	}
	for _, step := range steps {
		writeFile(t, file, step.content)
		testkit.WaitEqual(t, 10*time.Second, step.name, func() bool {
			return slices.Equal(addrs(st, "a.prod.svc.cluster.local."), []string{step.ip})
		}, true)
		if got := skipCount(t, reg, KindDocument, ReasonDecode); got != step.count {
			t.Errorf("%s: counted %v, want %v", step.name, got, step.count)
		}
		if got := strings.Count(logs.String(), logged); got != step.logs {
			t.Errorf("%s: logged %d times, want %d:\n%s", step.name, got, step.logs, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "document=2") || !strings.Contains(logs.String(), "file="+file) {
		t.Errorf("the log does not name the file and document:\n%s", logs.String())
	}
	// A new file in the directory.
	writeFile(t, filepath.Join(dir, "b.yaml"), strings.Replace(svcA, "name: a", "name: b", 1))
	testkit.WaitEqual(t, 10*time.Second, "new file", func() bool { return addrs(st, "b.prod.svc.cluster.local.") != nil }, true)

	run.Stop()
}

// TestManifestsSingleFile watches one file: other files of its directory do
// not matter, a rename-over (how editors and ConfigMap mounts update) does.
func TestManifestsSingleFile(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	file := filepath.Join(dir, "objects.yaml")
	writeFile(t, file, svcA)
	writeFile(t, filepath.Join(dir, "other.yaml"), "not: [valid")
	st := newStore(t, store.Options{})
	m := &Manifests{Path: file, Store: st, Debounce: 10 * time.Millisecond}
	run := testkit.Go(t, "Run", m.Run)
	testkit.WaitEqual(t, 10*time.Second, "first load", func() bool { return addrs(st, "a.prod.svc.cluster.local.") != nil }, true)

	tmp := filepath.Join(dir, ".objects.yaml.tmp")
	writeFile(t, tmp, strings.Replace(svcA, "10.96.0.1", "10.96.0.5", 1))
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 10*time.Second, "rename-over reload", func() bool {
		return slices.Equal(addrs(st, "a.prod.svc.cluster.local."), []string{"10.96.0.5"})
	}, true)
	run.Stop()
}

// TestManifestsLoadedBeforeRun: NewFeed loads the manifests, and Run
// watches them later. A change made in between has no event: Run loads
// again when the files differ from those loaded, and only then. Writes
// are atomic, as a reload may read at any moment.
func TestManifestsLoadedBeforeRun(t *testing.T) {
	withIP := func(ip string) string { return strings.Replace(svcA, "10.96.0.1", ip, 1) }
	tests := []struct {
		name      string
		before    func(dir string) // after Load, before Run
		whileRun  func(dir string) // after Run began
		name2, ip string           // what the first reload serves
	}{
		{"edited before the watch began", func(dir string) { testkit.WriteAtomic(t, filepath.Join(dir, "svc.yaml"), withIP("10.96.0.2")) }, nil,
			"a", "10.96.0.2"},
		{"a file added before the watch began", func(dir string) {
			testkit.WriteAtomic(t, filepath.Join(dir, "b.yaml"), strings.Replace(svcA, "name: a", "name: b", 1))
		}, nil, "b", "10.96.0.1"},
		{"unchanged until an edit while watched", nil, func(dir string) { testkit.WriteAtomic(t, filepath.Join(dir, "svc.yaml"), withIP("10.96.0.3")) },
			"a", "10.96.0.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "svc.yaml")
			writeFile(t, file, svcA)
			// Settled: written long before it is read.
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(file, old, old); err != nil {
				t.Fatal(err)
			}
			st := newStore(t, store.Options{})
			reloads := make(chan error, 8)
			m := &Manifests{Path: dir, Store: st, Debounce: 10 * time.Millisecond, OnReload: func(err error) { reloads <- err }}
			if err := m.Load(); err != nil {
				t.Fatal(err)
			}
			if tt.before != nil {
				tt.before(dir)
			}
			run := testkit.Go(t, "Run", m.Run)
			if tt.whileRun != nil {
				tt.whileRun(dir)
			}
			select {
			case err := <-reloads:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no reload within 10s")
			}
			name := tt.name2 + ".prod.svc.cluster.local."
			if got := addrs(st, name); !slices.Equal(got, []string{tt.ip}) {
				t.Errorf("after the first reload %s = %v, want [%s]", name, got, tt.ip)
			}
			run.Stop()
		})
	}
}

// TestKeyedStoreRelist: a relist (Replace) sets every listed object and
// deletes what the store holds that the list no longer has; a delete with
// an unknown final state is applied; the store is synced from the first
// Replace on.
func TestKeyedStoreRelist(t *testing.T) {
	var log []string
	held := map[store.Key]bool{} // the store
	key := func(obj any) store.Key {
		m := obj.(metav1.Object)
		return store.Key{Namespace: m.GetNamespace(), Name: m.GetName()}
	}
	notified := 0
	k := &keyedStore{
		kind: kind{name: "services",
			set:  func(obj any) { held[key(obj)] = true; log = append(log, "set "+key(obj).Namespace+"/"+key(obj).Name) },
			del:  func(obj any) { delete(held, key(obj)); log = append(log, "del "+key(obj).Namespace+"/"+key(obj).Name) },
			keys: func() iter.Seq[store.Key] { return maps.Keys(held) }},
		notify: func() { notified++ },
		synced: make(chan struct{}),
	}
	svc := func(ns, name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	if testkit.Closed(k.synced) {
		t.Fatal("synced before the first list")
	}
	steps := []struct {
		do   func() error
		want []string
	}{
		{func() error { return k.Replace([]any{svc("a", "x"), svc("b", "y")}, "1") }, []string{"set a/x", "set b/y"}},
		{func() error { return k.Add(svc("c", "z")) }, []string{"set c/z"}},
		{func() error { return k.Replace([]any{svc("b", "y")}, "2") }, []string{"set b/y", "del a/x", "del c/z"}},
		{func() error { return k.Delete(cache.DeletedFinalStateUnknown{Key: "b/y", Obj: svc("b", "y")}) }, []string{"del b/y"}},
		{func() error { return k.Replace(nil, "3") }, nil},
		{func() error { return k.Replace([]any{svc("d", "w")}, "4") }, []string{"set d/w"}},
		{func() error {
			held[store.Key{Namespace: "e", Name: "v"}] = true
			return k.Replace([]any{svc("d", "w")}, "5")
		}, []string{"set d/w", "del e/v"}},
	}
	for i, st := range steps {
		log = nil
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := slices.Clone(log)
		if len(got) > 1 {
			slices.Sort(got[1:]) // deletes come in map order
		}
		if !slices.Equal(got, st.want) {
			t.Errorf("step %d: %v, want %v", i, got, st.want)
		}
		if !testkit.Closed(k.synced) {
			t.Errorf("step %d: not synced", i)
		}
	}
	if notified != len(steps) {
		t.Errorf("notified %d times for %d steps", notified, len(steps))
	}
	if err := k.Add("not an object"); err == nil {
		t.Error("Add of a non-object: no error")
	}
}

// recorder is an EventRecorder that keeps what it is asked to post.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	ref := obj.(*corev1.ObjectReference)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s %s/%s uid=%s: %s", eventtype, reason, ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, ref.UID, message))
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// TestClusterFeedSkips: from the API server, a Service named with a digit
// first is served; an object the API server stores but DNS cannot serve
// (an ExternalName with a 64-byte label, which the API server's subdomain
// check lets through) is skipped, counted, logged and given a Warning
// Event once per problem: not again on an update with the same problem,
// again when the problem changes or comes back after a fix or a delete.
func TestClusterFeedSkips(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	long := strings.Repeat("a", 64) + ".example.com"
	ext := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "prod", UID: "uid-ext"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: name}}
	}
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "1kubernetes", Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1"}},
		ext(long),
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "1kubernetes-x", Namespace: "prod", UID: "uid-slice",
			Labels: map[string]string{discoveryv1.LabelServiceName: "1kubernetes"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.300"}}}},
	)
	st := newStore(t, store.Options{})
	rec := &recorder{}
	skips, reg, logs := newSkips(t, rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Cluster{Client: client, Store: st, Skips: skips}).Run(ctx) }()
	testkit.WaitEqual(t, 10*time.Second, "first sync", func() bool { return st.Snapshot() != nil }, true)

	if got := addrs(st, "1kubernetes.prod.svc.cluster.local."); !slices.Equal(got, []string{"10.96.0.1"}) {
		t.Errorf("1kubernetes = %v, want 10.96.0.1", got)
	}
	if got := skipCount(t, reg, KindEndpointSlice, ReasonInvalidField); got != 1 {
		t.Errorf("endpointslice/invalid-field counted %v, want 1", got)
	}

	svcs := client.CoreV1().Services("prod")
	markers := 0
	// settle waits until a new Service, created after the changes before
	// it, is served: the reflector has applied those changes.
	settle := func(t *testing.T) {
		t.Helper()
		markers++
		name := fmt.Sprintf("marker%d", markers)
		if _, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.WaitEqual(t, 10*time.Second, name, func() bool { return addrs(st, name+".prod.svc.cluster.local.") != nil }, true)
	}
	update := func(name string) func(t *testing.T) {
		return func(t *testing.T) {
			s := ext(name)
			s.Annotations = map[string]string{"change": fmt.Sprint(markers)}
			if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		name   string
		do     func(t *testing.T)
		served bool    // ext answers
		count  float64 // service/invalid-field
	}{
		{"initial list", func(*testing.T) {}, false, 1},
		{"update with the same problem", update(long), false, 1},
		{"another problem", update("x." + long), false, 2},
		{"fixed", update("example.com"), true, 2},
		{"broken again", update(long), false, 3},
		{"deleted", func(t *testing.T) {
			if err := svcs.Delete(ctx, "ext", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, false, 3},
		{"created broken", func(t *testing.T) {
			if _, err := svcs.Create(ctx, ext(long), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, false, 4},
	}
	for _, step := range steps {
		step.do(t)
		settle(t)
		if _, ok := st.Snapshot().Lookup("ext.prod.svc.cluster.local."); ok != step.served {
			t.Errorf("%s: ext served %v, want %v", step.name, ok, step.served)
		}
		if got := skipCount(t, reg, KindService, ReasonInvalidField); got != step.count {
			t.Errorf("%s: service/invalid-field counted %v, want %v", step.name, got, step.count)
		}
		if n := strings.Count(logs.String(), "kind=service"); float64(n) != step.count {
			t.Errorf("%s: %d service log records, want %v", step.name, n, step.count)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	want := []string{
		"Warning DNSRecordSkipped discovery.k8s.io/v1 EndpointSlice prod/1kubernetes-x uid=uid-slice: not served by the cluster DNS: endpoints[0].addresses[0] \"10.1.0.300\"",
		"Warning DNSRecordSkipped v1 Service prod/ext uid=uid-ext: not served by the cluster DNS: spec.externalName \"" + long + "\": label \"" + strings.Repeat("a", 64) + "\" longer than 63 bytes",
		"Warning DNSRecordSkipped v1 Service prod/ext uid=uid-ext: not served by the cluster DNS: spec.externalName \"" + long + "\"",
		"Warning DNSRecordSkipped v1 Service prod/ext uid=uid-ext: not served by the cluster DNS: spec.externalName \"" + long + "\"",
		"Warning DNSRecordSkipped v1 Service prod/ext uid=uid-ext: not served by the cluster DNS: spec.externalName \"x." + long + "\"",
	}
	got := rec.list()
	slices.Sort(got)
	if len(got) != len(want) {
		t.Fatalf("events\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d:\n%s\nwant a prefix\n%s", i, got[i], want[i])
		}
	}
}

// TestSkipsRecord: what Skips remembers is forgotten when a relist no
// longer has the object, and holds at most maxSkipsRemembered problems;
// past that a problem is still counted, maybe more than once, and the
// bound is logged once.
func TestSkipsRecord(t *testing.T) {
	skips, reg, logs := newSkips(t, nil)
	bad := func(name string) error {
		_, err := ToService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "x"}})
		return err
	}
	ctx := t.Context()
	count := func() float64 { return skipCount(t, reg, KindService, ReasonInvalidField) }
	skips.object(ctx, serviceKind, bad("a"))
	skips.object(ctx, serviceKind, bad("a"))
	skips.relisted(KindService, func(k store.Key) bool { return k == store.Key{Namespace: "prod", Name: "a"} })
	skips.object(ctx, serviceKind, bad("a"))
	if got := count(); got != 1 {
		t.Fatalf("counted %v, want 1: still listed, the same problem", got)
	}
	skips.relisted(KindEndpointSlice, func(store.Key) bool { return false }) // another kind
	skips.object(ctx, serviceKind, bad("a"))
	skips.relisted(KindService, func(store.Key) bool { return false })
	skips.object(ctx, serviceKind, bad("a"))
	if got := count(); got != 2 {
		t.Fatalf("counted %v, want 2: the relist forgot it", got)
	}

	for i := range maxSkipsRemembered {
		skips.object(ctx, serviceKind, bad(fmt.Sprint("s", i)))
	}
	// a and s0 .. s9998 are remembered; s9999 is not.
	last := fmt.Sprint("s", maxSkipsRemembered-1)
	for _, name := range []string{"a", "s0", last, last} {
		skips.object(ctx, serviceKind, bad(name))
	}
	if got, want := count(), float64(2+maxSkipsRemembered+2); got != want {
		t.Errorf("counted %v, want %v", got, want)
	}
	if n := strings.Count(logs.String(), "too many skipped objects"); n != 1 {
		t.Errorf("the bound logged %d times, want 1", n)
	}
	if got := len(skips.seen); got != maxSkipsRemembered {
		t.Errorf("remembers %d problems, want %d", got, maxSkipsRemembered)
	}
	skips.relisted(KindService, func(store.Key) bool { return false })
	if len(skips.seen) != 0 {
		t.Errorf("remembers %d problems after a relist of none", len(skips.seen))
	}
}

// TestRetryBackoff: a reflector of the cluster DNS waits at most 4 s
// between tries however long the API server is away, and at least the
// base wait, so that a change made during an outage is answered soon
// after the return.
func TestRetryBackoff(t *testing.T) {
	b := retryBackoff()
	for i := range 50 {
		d := b.Step()
		if d < 500*time.Millisecond || d >= 4*time.Second {
			t.Fatalf("wait %d: %s, want within [0.5s, 4s)", i, d)
		}
	}
	if b.Cap != 2*time.Second || b.Jitter != 1 {
		t.Errorf("cap %s jitter %v", b.Cap, b.Jitter)
	}
}
