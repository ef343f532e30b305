package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
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

// TestStagedEqualsDirect: a streamed initial list converts its objects in
// the reflector's transform (staged) and stores them at its Replace. The
// store must then hold what the same objects give through the watch path,
// a bad one skipped and a dropped pod removed in both.
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
	load := func(staged bool) *store.Store {
		st := newStore(t, store.Options{Pods: store.PodsVerified})
		// A record each bad or dropped object replaces, so that its removal shows.
		st.SetService(store.Service{Namespace: "prod", Name: "Bad_Name", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.99")}})
		st.SetPod(store.Pod{Namespace: "prod", Name: "done", IPs: []netip.Addr{netip.MustParseAddr("10.1.0.8")}})
		c := &Cluster{Client: fake.NewClientset(), Store: st, Pods: true}
		for _, k := range c.kinds(sink{ctx: t.Context(), log: slog.New(slog.DiscardHandler), store: st}) {
			ks := &keyedStore{kind: k, notify: func() {}, synced: make(chan struct{})}
			var list []any
			for _, obj := range objs[k.name] {
				if staged {
					var err error
					if obj, err = ks.Transformer()(obj); err != nil {
						t.Fatal(err)
					}
					if _, ok := obj.(keyed); !ok {
						t.Fatalf("%s: transform gave %T, not a staged record", k.name, obj)
					}
				}
				list = append(list, obj)
			}
			// The bad service and the dropped pod stay listed: Replace
			// keeps their keys, the set removes them.
			if err := ks.Replace(list, "1"); err != nil {
				t.Fatal(err)
			}
		}
		st.Publish()
		return st
	}
	dump := func(st *store.Store) []string {
		var out []string
		st.Snapshot().Names(func(name string, _ *store.Node) {
			out = append(out, name+" "+strings.Join(addrs(st, name), ","))
		})
		slices.Sort(out)
		for _, k := range []store.ObjectKind{store.KindService, store.KindEndpointSlice, store.KindPod} {
			keys := st.Keys(k)
			slices.SortFunc(keys, func(a, b store.Key) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
			out = append(out, fmt.Sprint(k, keys))
		}
		return out
	}
	direct, staged := dump(load(false)), dump(load(true))
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
		}(), `service n/web.x: metadata.name "web.x": a DNS-1035 label`},
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

func TestLoadManifestsErrors(t *testing.T) {
	cases := []struct {
		name     string
		content  string
		wantDoc  int
		contains string
	}{
		{"bad yaml", svcA + "---\nkind: Service\n  bad: [indent\n", 2, "parse yaml"},
		{"unknown field", svcA + "---\n" + strings.Replace(svcA, "clusterIP", "clusterIp", 1), 2, "unknown field"},
		{"bad ip third doc", svcA + "---\n# comment only\n---\n" + strings.Replace(svcA, "10.96.0.1", "10.96.0.999", 1), 3, `spec.clusterIP[0] "10.96.0.999"`},
		{"missing kind", "---\napiVersion: v1\nmetadata: {name: x}\n", 1, "kind is missing"},
		{"crlf", strings.ReplaceAll(svcA+"---\n"+strings.Replace(svcA, "clusterIP", "clusterIp", 1), "\n", "\r\n"), 2, "unknown field"},
		// The reader fails on the separator line, while reading document 1.
		{"content after separator", svcA + "--- {kind: Service}\n", 1, "invalid Yaml document separator: {kind: Service}"},
		{"slice without service label", "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\naddressType: IPv4\nendpoints: []\n", 1, "kubernetes.io/service-name"},
		{"list item", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  status: {podIP: bad}\n", 1, "items[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.yaml"), svcA)
			writeFile(t, filepath.Join(dir, "b.yaml"), tc.content)
			_, err := LoadManifests(dir)
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v, want a *ManifestError", err)
			}
			if me.File != filepath.Join(dir, "b.yaml") || me.Doc != tc.wantDoc || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("error = %v (file %q doc %d), want b.yaml document %d containing %q", err, me.File, me.Doc, tc.wantDoc, tc.contains)
			}
		})
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

func TestManifestsReload(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	file := filepath.Join(dir, "svc.yaml")
	writeFile(t, file, svcA)
	st := newStore(t, store.Options{})
	reloads := make(chan error, 16)
	m := &Manifests{Path: dir, Store: st, Debounce: 10 * time.Millisecond, OnReload: func(err error) { reloads <- err }}
	run := testkit.Go(t, "Run", m.Run)
	testkit.WaitEqual(t, 10*time.Second, "first load", func() bool { return slices.Equal(addrs(st, "a.prod.svc.cluster.local."), []string{"10.96.0.1"}) }, true)

	wait := func() error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload")
			return nil
		}
	}
	// A bad manifest: reported with file and document, old data kept.
	writeFile(t, file, svcA+"---\nkind: Service\nspec: [\n")
	err := wait()
	for err == nil { // an editor may produce several events
		err = wait()
	}
	var me *ManifestError
	if !errors.As(err, &me) || me.File != file || me.Doc != 2 {
		t.Fatalf("reload error = %v, want svc.yaml document 2", err)
	}
	if got := addrs(st, "a.prod.svc.cluster.local."); !slices.Equal(got, []string{"10.96.0.1"}) {
		t.Fatalf("after a bad reload a = %v, want the previous data", got)
	}
	// Fixed: the new data is served.
	writeFile(t, file, strings.Replace(svcA, "10.96.0.1", "10.96.0.2", 1))
	testkit.WaitEqual(t, 10*time.Second, "reload", func() bool { return slices.Equal(addrs(st, "a.prod.svc.cluster.local."), []string{"10.96.0.2"}) }, true)
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
			keys: func() []store.Key { return slices.Collect(maps.Keys(held)) }},
		notify: func() { notified++ },
		synced: make(chan struct{}),
	}
	svc := func(ns, name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	if closed(k.synced) {
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
		if !closed(k.synced) {
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

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
