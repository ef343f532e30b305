package kubefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/fqdn"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// The Multi-Cluster Services API (KEP-1645), as the clusterset feed reads
// it.
const (
	// mcsGroup is the ServiceImports' API group.
	mcsGroup = "multicluster.x-k8s.io"
	// mcsServiceLabel and mcsClusterLabel name an imported EndpointSlice's
	// ServiceImport and the cluster its endpoints run in.
	mcsServiceLabel = mcsv1beta1.LabelServiceName
	mcsClusterLabel = mcsv1beta1.LabelSourceCluster
)

// KindServiceImport is a ServiceImport, as ObjectError.Kind and the kind
// label of objects_skipped_total.
const KindServiceImport = "serviceimport"

var (
	serviceImportKind    = objectKind{KindServiceImport, "ServiceImport", mcsGroup + "/v1beta1"}
	importedEndpointKind = objectKind{KindEndpointSlice, "EndpointSlice", "discovery.k8s.io/v1"}
)

// Clusterset feeds a store whose zone is the clusterset zone (e.g.
// clusterset.local) from what a Multi-Cluster Services implementation
// writes into this cluster: the ServiceImports, and the EndpointSlices
// labelled with an import's name and the cluster their endpoints run
// in. An import is a Service of the store: a ClusterSetIP import a
// ClusterIP Service with the clusterset IPs, a Headless one a headless
// Service. An imported endpoint is named <hostname>.<clusterid> (its
// hostname, else its dashed address), so that the store's rules make
// the spec's names: <svc>.<ns>.svc.<zone> for every ready endpoint of
// every cluster, and <hostname>.<clusterid>.<svc>.<ns>.svc.<zone> for
// each.
//
// An import's trafficDistribution (PreferSameZone, PreferClose,
// PreferSameNode) answers a client the ready endpoints of its topology
// zone, else those of its own cluster, else all. The store's two tiers
// carry them: an imported endpoint's NodeName holds its topology zone and
// its TopologyZone its cluster, and the import prefers the "node"
// (store.Snapshot.VariantFor(name, this cluster, the client's zone)).
// This cluster's ID is the ClusterProperty cluster.clusterset.k8s.io
// (about.k8s.io, KEP-2149), read at start (LocalCluster); without it the
// cluster tier is skipped.
//
// The ServiceImports are read at the newest version the API server
// serves: v1beta1, else v1alpha1 (what CoreDNS reads). Until the API
// server serves either (the CRDs are not installed) the feed asks again
// every Retry, and the zone is not synced.
type Clusterset struct {
	Client kubernetes.Interface
	MCS    mcsclient.Interface
	Store  Publisher
	Logger *slog.Logger
	Skips  *Skips
	// Retry is how long to wait before asking again for the ServiceImport
	// API (default 30s).
	Retry time.Duration

	// LocalCluster receives this cluster's ID when it is read.
	LocalCluster func(id string)

	mu         sync.Mutex
	imports    map[store.Key]struct{} // the imports held
	namespaces map[string]int         // imports per namespace: the zone's namespaces
	version    string                 // the version read, once discovered
}

// Version is the ServiceImport version read: "v1beta1" or "v1alpha1",
// "" until the API server serves one.
func (c *Clusterset) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Run finds the ServiceImport version, then feeds the store until ctx is
// done, as Cluster.Run does.
func (c *Clusterset) Run(ctx context.Context) error {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.imports, c.namespaces = map[store.Key]struct{}{}, map[string]int{}
	retry := c.Retry
	if retry <= 0 {
		retry = 30 * time.Second
	}
	for {
		v, err := ServiceImportVersion(c.Client.Discovery())
		if err == nil && v != "" {
			c.mu.Lock()
			c.version = v
			c.mu.Unlock()
			log.InfoContext(ctx, "clusterset: reading ServiceImports", "version", mcsGroup+"/"+v)
			break
		}
		log.WarnContext(ctx, "clusterset: the API server serves no ServiceImports (install the Multi-Cluster Services CRDs); asking again", "group", mcsGroup, "in", retry, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the ServiceImport API: %w", ctx.Err())
		case <-time.After(retry):
		}
	}
	if id, err := ClusterID(ctx, c.Client); err != nil {
		log.WarnContext(ctx, "clusterset: this cluster's ID is unknown (ClusterProperty "+clusterIDProperty+"): trafficDistribution skips the cluster tier", "err", err)
	} else if c.LocalCluster != nil {
		log.InfoContext(ctx, "clusterset: this cluster", "id", id)
		c.LocalCluster(id)
	}
	skips := c.Skips
	if skips == nil {
		skips = unregisteredSkips(log)
	}
	return runKinds(ctx, c.Client, c.Store, log, "clusterset records synced", nil, c.kinds(sink{ctx: ctx, store: c.Store, skips: skips}))
}

// clusterIDProperty is the ClusterProperty that holds a cluster's ID in
// its clusterset (KEP-2149).
const clusterIDProperty = "cluster.clusterset.k8s.io"

// ClusterID reads this cluster's ID: the value of the ClusterProperty
// cluster.clusterset.k8s.io (about.k8s.io/v1alpha1).
func ClusterID(ctx context.Context, client kubernetes.Interface) (string, error) {
	rc := client.Discovery().RESTClient()
	if rc == nil {
		return "", errors.New("no REST client")
	}
	b, err := rc.Get().AbsPath("/apis/about.k8s.io/v1alpha1/clusterproperties/" + clusterIDProperty).DoRaw(ctx)
	if err != nil {
		return "", err
	}
	var p struct {
		Spec struct {
			Value string `json:"value"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("clusterproperty %s: %w", clusterIDProperty, err)
	}
	if err := checkName(p.Spec.Value, fqdn.Label); err != nil {
		return "", fmt.Errorf("clusterproperty %s: spec.value: %w", clusterIDProperty, err)
	}
	return p.Spec.Value, nil
}

// ServiceImportVersion is the newest ServiceImport version the API
// server serves ("v1beta1", else "v1alpha1"), "" when it serves none.
func ServiceImportVersion(d discovery.DiscoveryInterface) (string, error) {
	var errs []error
	for _, v := range []string{"v1beta1", "v1alpha1"} {
		rl, err := d.ServerResourcesForGroupVersion(mcsGroup + "/" + v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range rl.APIResources {
			if r.Name == "serviceimports" {
				return v, nil
			}
		}
	}
	if len(errs) == 2 && !apierrors.IsNotFound(errs[0]) {
		return "", errs[0]
	}
	return "", nil
}

// kinds are the two resources Run follows: the ServiceImports of the
// version found, and the imported EndpointSlices (by label).
func (c *Clusterset) kinds(s sink) []kind {
	imp := kind{name: "serviceimports", del: s.deleter(serviceImportKind, c.deleteImport),
		keys: s.keys(store.KindService), relisted: s.relisted(serviceImportKind)}
	if c.version == "v1alpha1" {
		imp.example, imp.lw = &mcsv1alpha1.ServiceImport{}, lwOf(c.MCS.MulticlusterV1alpha1().ServiceImports(""))
		imp.set = setter(s, serviceImportKind, ImportV1alpha1, c.setImport, c.deleteImport)
	} else {
		imp.example, imp.lw = &mcsv1beta1.ServiceImport{}, lwOf(c.MCS.MulticlusterV1beta1().ServiceImports(""))
		imp.set = setter(s, serviceImportKind, ImportV1beta1, c.setImport, c.deleteImport)
	}
	disc := c.Client.DiscoveryV1()
	byLabel := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = mcsServiceLabel
		return o
	}
	eps := kind{name: "imported endpointslices", example: &discoveryv1.EndpointSlice{},
		del: s.deleter(importedEndpointKind, s.store.DeleteEndpointSlice), keys: s.keys(store.KindEndpointSlice),
		relisted: s.relisted(importedEndpointKind),
		lw: listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return disc.EndpointSlices("").List(ctx, byLabel(o))
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return disc.EndpointSlices("").Watch(ctx, byLabel(o))
		})}
	eps.set = setter(s, importedEndpointKind, ImportedEndpointSlice, s.store.SetEndpointSlice, s.store.DeleteEndpointSlice)
	return []kind{imp, eps}
}

// listWatcher is a typed client of one resource and version.
type listWatcher[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// lwOf lists and watches with c.
func lwOf[L runtime.Object](c listWatcher[L]) *cache.ListWatch {
	return listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }, c.Watch)
}

// setImport stores an import; the zone knows a namespace while it holds
// an import of it.
func (c *Clusterset) setImport(svc store.Service) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := store.Key{Namespace: svc.Namespace, Name: svc.Name}
	if _, had := c.imports[k]; !had {
		c.imports[k] = struct{}{}
		if c.namespaces[svc.Namespace]++; c.namespaces[svc.Namespace] == 1 {
			c.Store.SetNamespace(store.Namespace{Name: svc.Namespace})
		}
	}
	c.Store.SetService(svc)
}

// deleteImport removes an import; its namespace goes with its last one.
func (c *Clusterset) deleteImport(ns, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := store.Key{Namespace: ns, Name: name}
	if _, had := c.imports[k]; !had {
		return
	}
	delete(c.imports, k)
	c.Store.DeleteService(ns, name)
	if c.namespaces[ns]--; c.namespaces[ns] == 0 {
		delete(c.namespaces, ns)
		c.Store.DeleteNamespace(ns)
	}
}

// mcsImport is what both versions of a ServiceImport say that the zone
// needs.
type mcsImport struct {
	headless bool
	ips      []string
	families []corev1.IPFamily // v1beta1: the families served; empty: every one
	ports    []corev1.ServicePort
	traffic  *string // v1beta1: trafficDistribution
	notReady bool    // v1beta1: the Ready condition is False
}

// ImportV1beta1 converts a v1beta1 ServiceImport to the clusterset
// zone's Service; one whose Ready condition is False is not kept.
func ImportV1beta1(si *mcsv1beta1.ServiceImport) (store.Service, bool, error) {
	in := mcsImport{headless: si.Spec.Type == mcsv1beta1.Headless, ips: si.Spec.IPs, families: si.Spec.IPFamilies,
		traffic: si.Spec.TrafficDistribution}
	for _, p := range si.Spec.Ports {
		in.ports = append(in.ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	if c := meta.FindStatusCondition(si.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse {
		in.notReady = true
	}
	return in.service(si)
}

// ImportV1alpha1 converts a v1alpha1 ServiceImport to the clusterset
// zone's Service.
func ImportV1alpha1(si *mcsv1alpha1.ServiceImport) (store.Service, bool, error) {
	in := mcsImport{headless: si.Spec.Type == mcsv1alpha1.Headless, ips: si.Spec.IPs}
	for _, p := range si.Spec.Ports {
		in.ports = append(in.ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	return in.service(si)
}

// service is the Service of the import m.
func (in mcsImport) service(m metav1.Object) (store.Service, bool, error) {
	out := store.Service{Namespace: namespaceOf(m), Name: m.GetName(), Type: store.ClusterIP}
	bad := func(field string, err error) (store.Service, bool, error) {
		return out, false, objectErr(KindServiceImport, m, field, err)
	}
	if field, err := checkMeta(m.GetName(), out.Namespace, true); err != nil {
		return bad(field, err)
	}
	for i, p := range in.ports {
		proto, field, err := checkPort("spec.ports", i, p.Port, p.Name, p.Protocol)
		if err != nil {
			return bad(field, err)
		}
		out.Ports = append(out.Ports, store.Port{Name: intern(p.Name), Protocol: proto, Port: uint16(p.Port)})
	}
	if in.traffic != nil {
		out.TrafficDistribution = intern(*in.traffic)
		switch *in.traffic {
		case corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameNode:
			// The zone, then the cluster: the store's node, then its zone.
			out.TrafficDistribution = corev1.ServiceTrafficDistributionPreferSameNode
		}
	}
	if in.headless {
		out.Type = store.Headless
		return out, !in.notReady, nil
	}
	for i, ip := range in.ips {
		a, err := parseIP(ip)
		if err != nil {
			return bad(fmt.Sprintf("spec.ips[%d]", i), fmt.Errorf("%q: %w", ip, err))
		}
		if in.serves(a) {
			out.ClusterIPs = append(out.ClusterIPs, a)
		}
	}
	return out, !in.notReady, nil
}

// serves says whether the import's families include a's (every family
// when it lists none).
func (in mcsImport) serves(a netip.Addr) bool {
	if len(in.families) == 0 {
		return true
	}
	want := corev1.IPv6Protocol
	if a.Is4() {
		want = corev1.IPv4Protocol
	}
	for _, f := range in.families {
		if f == want {
			return true
		}
	}
	return false
}

// ImportedEndpointSlice converts an EndpointSlice an MCS implementation
// imported to the clusterset zone's: the Service is the import its
// multicluster.kubernetes.io/service-name label names, and each endpoint
// address is named <hostname>.<clusterid> (its dashed address when the
// endpoint has no hostname), clusterid being its source-cluster label.
func ImportedEndpointSlice(s *discoveryv1.EndpointSlice) (store.EndpointSlice, bool, error) {
	out, err := ToEndpointSlice(s)
	if err != nil {
		return out, false, err
	}
	out.Service = s.Labels[mcsServiceLabel]
	cluster := s.Labels[mcsClusterLabel]
	if err := checkName(cluster, fqdn.Label); err != nil {
		return out, false, objectErr(KindEndpointSlice, s, "metadata.labels["+mcsClusterLabel+"]", err)
	}
	named := make([]store.Endpoint, 0, len(out.Endpoints))
	for _, ep := range out.Endpoints {
		for _, a := range ep.Addresses {
			one := ep
			one.Addresses = []netip.Addr{a}
			label := ep.Hostname
			if label == "" {
				label = store.EndpointDashedIP(a)
			}
			one.Hostname = intern(strings.ToLower(label) + "." + cluster)
			one.PodName = ""
			// The tiers of an import: its zone, then its cluster (Clusterset).
			one.NodeName, one.TopologyZone = ep.TopologyZone, intern(cluster)
			named = append(named, one)
		}
	}
	out.Endpoints = named
	return out, true, nil
}
