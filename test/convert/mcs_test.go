package convert_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// The Multi-Cluster Services objects TestCorpus creates (mcsObjects):
// default/web a ClusterSetIP import with an address of its own, not web's
// ClusterIP; default/db a headless import whose endpoints come from
// cluster-b, one of them named.
const (
	mcsWebIP   = "10.96.200.10"
	mcsCluster = "cluster-b"
)

var (
	// CoreDNS 1.15 watches v1alpha1; mcs-api v0.5.2 serves it beside
	// v1beta1, its storage version.
	serviceImportGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "serviceimports"}
	mcsOnce          sync.Once
	mcsErr           error
)

// mcsObjects installs, once, the CRDs of sigs.k8s.io/mcs-api v0.5.2
// (ServiceImport, ServiceExport), which CoreDNS's multicluster option
// needs to sync, and the imports both servers answer under
// clusterset.local: what an MCS controller would write.
func mcsObjects(t *testing.T, cp *apiserver.ControlPlane) {
	t.Helper()
	mcsOnce.Do(func() { mcsErr = createMCS(t, cp) })
	if mcsErr != nil {
		t.Fatalf("multi-cluster services objects: %v", mcsErr)
	}
}

func createMCS(t *testing.T, cp *apiserver.ControlPlane) error {
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		return err
	}
	if err := apiserver.InstallMCSCRDs(ctx, cp.Config()); err != nil {
		return err
	}
	imports := []map[string]any{
		{"name": "web", "spec": map[string]any{"type": "ClusterSetIP", "ips": []any{mcsWebIP},
			"ports": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"}}}},
		{"name": "db", "spec": map[string]any{"type": "Headless",
			"ports": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"}}}},
	}
	for _, im := range imports {
		obj := unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
			"metadata": map[string]any{"name": im["name"], "namespace": "default"},
			"spec":     im["spec"],
		}}
		// The CRD's resource may take a moment to be served.
		testkit.WaitFor(t, 30*time.Second, func() error {
			_, err := dyn.Resource(serviceImportGVR).Namespace("default").Create(ctx, &obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	port, name, host := int32(80), "http", "db-0"
	_, err = cp.Client().DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "db-" + mcsCluster, Labels: map[string]string{
			"multicluster.kubernetes.io/service-name":   "db",
			"multicluster.kubernetes.io/source-cluster": mcsCluster,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.2.0.4"}, Hostname: &host}, {Addresses: []string{"10.2.0.5"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the EndpointSlice of db from %s: %w", mcsCluster, err)
	}
	return nil
}
