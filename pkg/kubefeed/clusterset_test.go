package kubefeed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// clustersetStore is an empty store of the clusterset zone.
func clustersetStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.New(store.Options{Zone: "clusterset.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// importedSlice is an EndpointSlice an MCS implementation imported from
// cluster for service.
func importedSlice(name, service, cluster string, family discoveryv1.AddressType, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod",
		Labels: map[string]string{mcsServiceLabel: service, mcsClusterLabel: cluster}},
		AddressType: family, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(80)), Protocol: ptr(corev1.ProtocolTCP)}}}
}

// serving makes the fake API server serve ServiceImports at versions.
func serving(client *fake.Clientset, versions ...string) {
	d := client.Discovery().(*fakediscovery.FakeDiscovery)
	for _, v := range versions {
		d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: mcsGroup + "/" + v,
			APIResources: []metav1.APIResource{{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"}}})
	}
}

// TestClustersetFeed: the imports of the version the API server serves
// (v1beta1 first) and their EndpointSlices become the clusterset zone's
// names, the spec's: the clusterset IPs of a ClusterSetIP import (its
// families only), every ready endpoint of every cluster of a headless
// one, and <hostname>.<clusterid> per endpoint; changes follow.
func TestClustersetFeed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, version := range []string{"v1beta1", "v1alpha1"} {
		t.Run(version, func(t *testing.T) {
			client := fake.NewClientset(
				importedSlice("db-a", "db", "east", discoveryv1.AddressTypeIPv4,
					discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Hostname: ptr("db-0")},
					discoveryv1.Endpoint{Addresses: []string{"10.1.0.2"}},
					discoveryv1.Endpoint{Addresses: []string{"10.1.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}}),
				importedSlice("db-b", "db", "west", discoveryv1.AddressTypeIPv4,
					discoveryv1.Endpoint{Addresses: []string{"10.2.0.1"}, Hostname: ptr("db-0")}),
				// An ordinary slice of the cluster: not the zone's.
				&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "db-local", Namespace: "prod",
					Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}, AddressType: discoveryv1.AddressTypeIPv4,
					Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}}}},
			)
			serving(client, version)
			var mcs *mcsfake.Clientset
			if version == "v1beta1" {
				mcs = mcsfake.NewSimpleClientset(
					&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"},
						Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.200.0.1", "fd00::1"},
							IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
					&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"},
						Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
					&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "prod"},
						Spec:   mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.200.0.9"}},
						Status: mcsv1beta1.ServiceImportStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending"}}}},
				)
			} else {
				mcs = mcsfake.NewSimpleClientset(
					&mcsv1alpha1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"},
						Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.ClusterSetIP, IPs: []string{"10.200.0.1"},
							Ports: []mcsv1alpha1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
					&mcsv1alpha1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"},
						Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.Headless, Ports: []mcsv1alpha1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
				)
			}
			slicesWatched, importsWatched := watchOpened(client, "endpointslices"), watchOpened(mcs, "serviceimports")
			st := clustersetStore(t)
			feed := &Clusterset{Client: client, MCS: mcs, Store: st}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- feed.Run(ctx) }()
			testkit.WaitEqual(t, 10*time.Second, "first sync", func() bool { return st.Snapshot() != nil }, true)
			if got := feed.Version(); got != version {
				t.Errorf("version read %q, want %q", got, version)
			}
			for _, tc := range []struct{ name, want []string }{
				{[]string{"web.prod.svc.clusterset.local."}, []string{"10.200.0.1"}},
				{[]string{"db.prod.svc.clusterset.local."}, []string{"10.1.0.1", "10.1.0.2", "10.2.0.1"}},
				{[]string{"db-0.east.db.prod.svc.clusterset.local."}, []string{"10.1.0.1"}},
				{[]string{"db-0.west.db.prod.svc.clusterset.local."}, []string{"10.2.0.1"}},
				{[]string{"10-1-0-2.east.db.prod.svc.clusterset.local."}, []string{"10.1.0.2"}},
				{[]string{"pending.prod.svc.clusterset.local."}, nil},
			} {
				if got := addrs(st, tc.name[0]); !slices.Equal(got, tc.want) {
					t.Errorf("%s = %v, want %v", tc.name[0], got, tc.want)
				}
			}
			if !st.Snapshot().HasNamespace("prod") {
				t.Error("namespace prod of the imports not known")
			}

			// A change arrives through the watch; the last import takes its
			// namespace with it.
			slicesWatched(t)
			if err := client.DiscoveryV1().EndpointSlices("prod").Delete(ctx, "db-b", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			testkit.WaitEqual(t, 10*time.Second, "west gone", func() bool {
				return slices.Equal(addrs(st, "db.prod.svc.clusterset.local."), []string{"10.1.0.1", "10.1.0.2"})
			}, true)
			importsWatched(t)
			var err error
			if version == "v1beta1" {
				for _, n := range []string{"web", "db", "pending"} {
					err = errors.Join(err, mcs.MulticlusterV1beta1().ServiceImports("prod").Delete(ctx, n, metav1.DeleteOptions{}))
				}
			} else {
				for _, n := range []string{"web", "db"} {
					err = errors.Join(err, mcs.MulticlusterV1alpha1().ServiceImports("prod").Delete(ctx, n, metav1.DeleteOptions{}))
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			testkit.WaitEqual(t, 10*time.Second, "namespace gone with its imports", func() bool { return st.Snapshot().HasNamespace("prod") }, false)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run after cancel = %v, want nil", err)
			}
		})
	}
}

// TestClustersetWaitsForTheAPI: without the CRDs the feed asks again, and
// ends with its context, never synced.
func TestClustersetWaitsForTheAPI(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	client := fake.NewClientset()
	st := clustersetStore(t)
	feed := &Clusterset{Client: client, MCS: mcsfake.NewSimpleClientset(), Store: st, Retry: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := feed.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want the context's deadline", err)
	}
	if st.Snapshot() != nil || feed.Version() != "" {
		t.Errorf("synced %v, version %q: want neither", st.Snapshot() != nil, feed.Version())
	}
}

// TestImportedEndpointSliceErrors: an imported slice without its cluster
// label, or with one that is no DNS label, is refused, naming the label.
func TestImportedEndpointSliceErrors(t *testing.T) {
	for _, cluster := range []string{"", "Not_A_Label"} {
		s := importedSlice("x", "db", cluster, discoveryv1.AddressTypeIPv4, discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}})
		if _, keep, err := ImportedEndpointSlice(s); err == nil || keep {
			t.Errorf("cluster %q: kept %v, err %v", cluster, keep, err)
		} else if want := "metadata.labels[" + mcsClusterLabel + "]"; !errors.As(err, new(*ObjectError)) || err.(*ObjectError).Field != want {
			t.Errorf("cluster %q: err %v, want the field %s", cluster, err, want)
		}
	}
	bad := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.200.0.1", "nope"}}}
	if _, _, err := ImportV1beta1(bad); err == nil || err.(*ObjectError).Field != "spec.ips[1]" {
		t.Errorf("a bad clusterset IP: %v, want spec.ips[1]", err)
	}
}

// TestClusterID reads this cluster's ID from the ClusterProperty
// cluster.clusterset.k8s.io, a DNS label as KEP-2149 requires; a missing
// or invalid one is an error that names it.
func TestClusterID(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want, err  string
	}{
		{"set", `{"apiVersion":"about.k8s.io/v1alpha1","kind":"ClusterProperty","metadata":{"name":"cluster.clusterset.k8s.io"},"spec":{"value":"east-1"}}`, 200, "east-1", ""},
		{"upper case", `{"spec":{"value":"East-1"}}`, 200, "", "spec.value"},
		{"missing", `{"kind":"Status","code":404}`, 404, "", "could not find"},
		{"not a label", `{"spec":{"value":"east_1"}}`, 200, "", "spec.value"},
		{"not json", `nope`, 200, "", "clusterproperty cluster.clusterset.k8s.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/about.k8s.io/v1alpha1/clusterproperties/cluster.clusterset.k8s.io" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ClusterID(t.Context(), client)
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("ClusterID = %q, %v; want %q, an error with %q", got, err, tc.want, tc.err)
			}
		})
	}
}
