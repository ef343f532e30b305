package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// The Multi-Cluster Services side of TestClusterClusterset: the mcs-api
// CRDs, deploy/ with the clusterset zone on, and the test's stand-in for
// an MCS controller.

// mcsManagedBy marks the EndpointSlices the test's controller writes, so
// that the EndpointSlice controller leaves them alone.
const mcsManagedBy = "mcs-controller.test.dnsconfigurer.io"

// installMCSCRDs creates the ServiceImport and ServiceExport CRDs of
// sigs.k8s.io/mcs-api (the module's version: v1alpha1 and v1beta1
// served) in c, and waits until ServiceImports can be listed at v1beta1.
func installMCSCRDs(ctx context.Context, c *Cluster) (mcsclient.Interface, error) {
	if err := apiserver.InstallMCSCRDs(ctx, c.Config); err != nil {
		return nil, err
	}
	mcs, err := mcsclient.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	return mcs, nil
}

// deployClusterset applies deploy/ as DeployDNS does, through an overlay
// that turns the clusterset zone on the way an operator would: the
// cluster DNS's ServerConfiguration gets `clustersetZone:
// clusterset.local` (in ConfigMap dnsconfigurer-dns and in the node-local
// stage's copy, dnsconfigurer-cluster-dns, which deploy/ writes from it
// before any overlay sees it), and the cluster DNS's ClusterRole the rule
// the chart adds for it (list and watch serviceimports). It waits until
// the cluster DNS, the node-local stage and the webhook are available.
// With direct, the node-local stage runs with --external=direct: only the
// names the cluster DNS's configuration routes specially, the clusterset
// zone among them, go to the cluster DNS; the rest to the node's
// nameservers (whose stub answers NXDOMAIN for clusterset.local).
func deployClusterset(ctx context.Context, c *Cluster, direct bool) error {
	base, err := DeployDir()
	if err != nil {
		return err
	}
	inner, err := c.WriteOverlayFor(base, "deploy-overlay")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(base, "dnsserver", "configmap.yaml"))
	if err != nil {
		return err
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return fmt.Errorf("deploy/dnsserver/configmap.yaml: %w", err)
	}
	cfg := cm.Data["config.yaml"]
	if cfg == "" {
		return fmt.Errorf("deploy/dnsserver/configmap.yaml: no config.yaml")
	}
	cfg += "clustersetZone: " + clustersetZone + "\n"
	dir := c.path("deploy-clusterset")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]any{
		"config-dns.json":  configMapPatch(DNSService, DeployNamespace, cfg),
		"config-copy.json": configMapPatch("dnsconfigurer-cluster-dns", NodeNamespace, cfg),
		"rbac.json": []map[string]any{{"op": "add", "path": "/rules/-", "value": map[string]any{
			"apiGroups": []string{mcsv1beta1.GroupName}, "resources": []string{"serviceimports"}, "verbs": []string{"list", "watch"},
		}}},
	}
	if direct {
		files["external-direct.json"] = []map[string]any{{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--external=direct"}}
	}
	for name, v := range files {
		j, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), j, 0o644); err != nil {
			return err
		}
	}
	rel, err := filepath.Rel(dir, inner)
	if err != nil {
		return err
	}
	kustomization := `# Written by test/cluster: the clusterset zone on (TestClusterClusterset).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ` + rel + `
patches:
- path: config-dns.json
- path: config-copy.json
- path: rbac.json
  target:
    kind: ClusterRole
    name: dnsconfigurer-dns
`
	if direct {
		kustomization += "- path: external-direct.json\n  target:\n    kind: DaemonSet\n    name: " + NodeLocalDS + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "-k", dir); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	for _, w := range []struct{ kind, ns, name string }{
		{"deployment", DeployNamespace, DNSDeployment}, {"daemonset", NodeNamespace, NodeLocalDS}, {"deployment", DeployNamespace, WebhookName},
	} {
		if err := c.WaitRollout(ctx, w.kind, w.ns, w.name); err != nil {
			return err
		}
	}
	ds, err := c.Client.AppsV1().DaemonSets(NodeNamespace).Get(ctx, NodeLocalDS, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if args := ds.Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--external=direct") != direct {
		return fmt.Errorf("node-local's arguments %q: --external=direct wanted %v", args, direct)
	}
	return nil
}

// configMapPatch is a strategic merge patch setting a ConfigMap's
// config.yaml.
func configMapPatch(name, ns, cfg string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]any{"config.yaml": cfg},
	}
}

// mcsCluster is a cluster of the clusterset: its id, its harness and its
// mcs-api client.
type mcsCluster struct {
	name string
	c    *Cluster
	mcs  mcsclient.Interface
}

// mcsController plays an MCS implementation's part for the exports of
// namespace ns of the source cluster: it imports every ServiceExport
// into every cluster as a ServiceImport (ClusterSetIP with the Service's
// ClusterIP as the clusterset IP, or Headless), and mirrors the exported
// Services' EndpointSlices into every cluster, one slice per Service
// labelled with its name and the source cluster's id, for as long as it
// runs. Hostnames and readiness are copied; node names and target
// references are not (they name objects of the source cluster).
type mcsController struct {
	source  mcsCluster
	targets []mcsCluster
	ns      string

	mu       sync.Mutex
	services []string                   // the exported Services
	seen     map[string]map[string]bool // by Service: every address ever imported
	syncs    int                        // slice writes
	lastErr  error                      // the last reconcile's
}

// importExports creates the ServiceImports of the source's
// ServiceExports in every target.
func (m *mcsController) importExports(ctx context.Context) error {
	exports, err := m.source.mcs.MulticlusterV1beta1().ServiceExports(m.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, e := range exports.Items {
		svc, err := m.source.c.Client.CoreV1().Services(m.ns).Get(ctx, e.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("exported Service %s/%s: %w", m.ns, e.Name, err)
		}
		si := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: m.ns},
			Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless},
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			si.Spec.Type = mcsv1beta1.ClusterSetIP
			si.Spec.IPs = []string{svc.Spec.ClusterIP}
			si.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
		for _, p := range svc.Spec.Ports {
			si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
		}
		for _, t := range m.targets {
			if _, err := t.mcs.MulticlusterV1beta1().ServiceImports(m.ns).Create(ctx, si, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("import %s/%s into %s: %w", m.ns, svc.Name, t.name, err)
			}
		}
		m.mu.Lock()
		m.services = append(m.services, svc.Name)
		m.mu.Unlock()
	}
	if len(exports.Items) == 0 {
		return fmt.Errorf("no ServiceExport in %s of %s", m.ns, m.source.name)
	}
	return nil
}

// run mirrors the exported Services' EndpointSlices until ctx ends: an
// informer on the source's slices wakes a reconcile of every Service.
func (m *mcsController) run(ctx context.Context) error {
	m.mu.Lock()
	services := slices.Clone(m.services)
	m.mu.Unlock()
	sel := fmt.Sprintf("%s in (%s)", discoveryv1.LabelServiceName, strings.Join(services, ","))
	f := informers.NewSharedInformerFactoryWithOptions(m.source.c.Client, 0, informers.WithNamespace(m.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	inf := f.Discovery().V1().EndpointSlices()
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { poke(o) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	lister := inf.Lister()
	for {
		var errs []error
		for _, svc := range services {
			from, err := lister.EndpointSlices(m.ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc}))
			if err == nil {
				err = m.mirror(ctx, svc, from)
			}
			errs = append(errs, err)
		}
		m.mu.Lock()
		m.lastErr = errors.Join(errs...)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(5 * time.Second): // retry a write that failed
		}
	}
}

// mirror writes svc's imported EndpointSlice, made of the source's
// slices, into every target.
func (m *mcsController) mirror(ctx context.Context, svc string, from []*discoveryv1.EndpointSlice) error {
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: svc + "-" + m.source.name, Namespace: m.ns,
			Labels: map[string]string{
				mcsv1beta1.LabelServiceName:   svc,
				mcsv1beta1.LabelSourceCluster: m.source.name,
				discoveryv1.LabelManagedBy:    mcsManagedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	byAddr := map[string]discoveryv1.Endpoint{}
	for _, s := range from {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		if want.Ports == nil {
			want.Ports = s.Ports
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			byAddr[e.Addresses[0]] = discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, Hostname: e.Hostname}
		}
	}
	for _, a := range slices.Sorted(maps.Keys(byAddr)) {
		want.Endpoints = append(want.Endpoints, byAddr[a])
	}
	m.mu.Lock()
	if m.seen == nil {
		m.seen = map[string]map[string]bool{}
	}
	if m.seen[svc] == nil {
		m.seen[svc] = map[string]bool{}
	}
	for a := range byAddr {
		m.seen[svc][a] = true
	}
	m.mu.Unlock()
	for _, t := range m.targets {
		api := t.c.Client.DiscoveryV1().EndpointSlices(m.ns)
		got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, want, metav1.CreateOptions{})
		case err == nil:
			if equality.Semantic.DeepEqual(got.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(got.Ports, want.Ports) {
				continue
			}
			upd := want.DeepCopy()
			upd.ResourceVersion = got.ResourceVersion
			_, err = api.Update(ctx, upd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("mirror %s's slice into %s: %w", svc, t.name, err)
		}
		m.mu.Lock()
		m.syncs++
		m.mu.Unlock()
	}
	return nil
}

// seenAll reports whether every address of addrs was ever imported
// for svc.
func (m *mcsController) seenAll(svc string, addrs []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range addrs {
		if !m.seen[svc][a] {
			return false
		}
	}
	return true
}

// stats returns the slice writes so far and the last reconcile's error.
func (m *mcsController) stats() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs, m.lastErr
}

// namespaceNamed creates namespace name in c (namespace sameness: the
// exporting namespace exists in every cluster), deleted at the end of t.
func namespaceNamed(t *testing.T, c *Cluster, name string) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	// Pods need the namespace's default ServiceAccount, which the
	// controller-manager creates.
	err := waitFor(ctx, "default ServiceAccount in "+name, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
}
