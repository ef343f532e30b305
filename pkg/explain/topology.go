package explain

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// Topology is what the cluster DNS needs to answer the pod's headless
// names: the pod's node, its topology zone label and the Services.
type Topology struct {
	Node string
	Zone string // the node's topology.kubernetes.io/zone label
	// Cluster is this cluster's ID in its clusterset (the ClusterProperty
	// cluster.clusterset.k8s.io), read for --service-import; "" unknown.
	Cluster  string
	Services []Service
	// Err says why the topology could not be read; the rest of the
	// report does not need it.
	Err string
}

// Service is a Service as the cluster DNS keeps it for topology, or a
// ServiceImport (Clusterset) as it keeps it for the clusterset zone.
type Service struct {
	Namespace, Name     string
	Clusterset          bool
	Headless            bool
	TrafficDistribution string
	// Endpoints are the served addresses: ready ones, or all with
	// publishNotReadyAddresses.
	Endpoints []Endpoint
}

// Endpoint is one served address of a Service.
type Endpoint struct {
	Address    string
	Zone, Node string
	Cluster    string // an imported endpoint's source cluster
	Ready      bool
}

// Answer is what the pod gets for a headless Service's name, and why:
// the -o json form of one Service.
type Answer struct {
	Service             string   `json:"service"`
	Clusterset          bool     `json:"clusterset,omitempty"` // a ServiceImport's clusterset name
	TrafficDistribution string   `json:"trafficDistribution,omitempty"`
	Headless            bool     `json:"headless"`
	Endpoints           int      `json:"endpoints"`
	ReadyInZone         int      `json:"readyInZone"`
	ReadyOnNode         int      `json:"readyOnNode"`
	Tier                string   `json:"tier"` // node, zone, cluster (an import), all or none
	Answers             []string `json:"answers"`
	Reason              string   `json:"reason"`
}

// TopologyReport is the -o json form of the topology part.
type TopologyReport struct {
	Node     string   `json:"node"`
	Zone     string   `json:"zone"`
	Services []Answer `json:"services"`
	Error    string   `json:"error,omitempty"`
}

// Route is what the pod on t.Node gets for svc's name, by pkg/topology's
// rule, the one the cluster DNS's store follows. Node and topology zone
// compare lowercase, as the store's variant keys do.
func Route(t *Topology, svc Service) Answer {
	if svc.Clusterset {
		return routeImport(t, svc)
	}
	a := Answer{Service: svc.Namespace + "/" + svc.Name, Clusterset: svc.Clusterset, TrafficDistribution: svc.TrafficDistribution,
		Headless: svc.Headless, Endpoints: len(svc.Endpoints), Answers: []string{}}
	c := topology.Client{Zone: strings.ToLower(t.Zone), Node: strings.ToLower(t.Node)}
	eps := make([]topology.Endpoint, len(svc.Endpoints))
	for i, e := range svc.Endpoints {
		eps[i] = topology.Endpoint{Zone: strings.ToLower(e.Zone), Node: strings.ToLower(e.Node), Ready: e.Ready}
		if e.Ready && eps[i].Zone == c.Zone && c.Zone != "" {
			a.ReadyInZone++
		}
		if e.Ready && eps[i].Node == c.Node && c.Node != "" {
			a.ReadyOnNode++
		}
	}
	if !svc.Headless {
		a.Tier, a.Reason = "none", "not headless: the name answers the ClusterIP; kube-proxy routes by trafficDistribution"
		return a
	}
	if len(eps) == 0 {
		a.Tier, a.Reason = "none", "no served endpoint: NXDOMAIN"
		return a
	}
	td := topologyRule(svc.TrafficDistribution)
	for _, i := range topology.Prefer(td, c, eps) {
		a.Answers = append(a.Answers, svc.Endpoints[i].Address)
	}
	a.Tier, a.Reason = reason(td, t, c, a)
	return a
}

// routeImport is Route for a ServiceImport's clusterset name: the ready
// endpoints of the pod's topology zone, else those of this cluster
// (t.Cluster), else all, as the clusterset zone answers
// (kubefeed.Clusterset); the tiers of pkg/topology with the zone as the
// "node" and the cluster as the "zone".
func routeImport(t *Topology, svc Service) Answer {
	a := Answer{Service: svc.Namespace + "/" + svc.Name, Clusterset: true, TrafficDistribution: svc.TrafficDistribution,
		Headless: svc.Headless, Endpoints: len(svc.Endpoints), Answers: []string{}}
	zone, cluster := strings.ToLower(t.Zone), strings.ToLower(t.Cluster)
	eps := make([]topology.Endpoint, len(svc.Endpoints))
	inCluster := 0
	for i, e := range svc.Endpoints {
		eps[i] = topology.Endpoint{Node: strings.ToLower(e.Zone), Zone: strings.ToLower(e.Cluster), Ready: e.Ready}
		if e.Ready && eps[i].Node == zone && zone != "" {
			a.ReadyInZone++
		}
		if e.Ready && eps[i].Zone == cluster && cluster != "" {
			inCluster++
		}
	}
	switch {
	case !svc.Headless:
		a.Tier, a.Reason = "none", "not headless: the name answers the clusterset IPs"
		return a
	case len(eps) == 0:
		a.Tier, a.Reason = "none", "no served endpoint: NXDOMAIN"
		return a
	case topologyRule(svc.TrafficDistribution) == "":
		a.Tier, a.Reason = "all", fmt.Sprintf("trafficDistribution %q → all %d of every cluster", svc.TrafficDistribution, a.Endpoints)
		for _, e := range svc.Endpoints {
			a.Answers = append(a.Answers, e.Address)
		}
		return a
	}
	for _, i := range topology.Prefer(topology.PreferSameNode, topology.Client{Node: zone, Zone: cluster}, eps) {
		a.Answers = append(a.Answers, svc.Endpoints[i].Address)
	}
	where := fmt.Sprintf("in topology zone %s (the pod's)", t.Zone)
	home := fmt.Sprintf("in cluster %s (this one)", t.Cluster)
	if t.Cluster == "" {
		home = "in this cluster (its ID unknown: no ClusterProperty " + "cluster.clusterset.k8s.io)"
	}
	switch {
	case a.ReadyInZone > 0:
		a.Tier, a.Reason = "zone", fmt.Sprintf("%s: %s %s → answers %s", svc.TrafficDistribution, count(a.ReadyInZone, "ready endpoint"), where, those(a.ReadyInZone))
	case inCluster > 0:
		a.Tier, a.Reason = "cluster", fmt.Sprintf("%s: none ready %s; %s %s → answers %s", svc.TrafficDistribution, where, count(inCluster, "ready endpoint"), home, those(inCluster))
	default:
		a.Tier, a.Reason = "all", fmt.Sprintf("%s: none ready %s; none %s → all %d of every cluster", svc.TrafficDistribution, where, home, a.Endpoints)
	}
	return a
}

// topologyRule is td when the store makes variants for it, else "".
func topologyRule(td string) string {
	switch td {
	case topology.PreferSameZone, topology.PreferClose, topology.PreferSameNode:
		return td
	}
	return ""
}

// reason names the tier Prefer's answer came from, walking Tiers as
// Prefer does, and why the tiers before it gave nothing.
func reason(td string, t *Topology, c topology.Client, a Answer) (tier, why string) {
	if td == "" {
		if a.TrafficDistribution != "" {
			return "all", fmt.Sprintf("trafficDistribution %q is not one the cluster DNS knows → all %d", a.TrafficDistribution, a.Endpoints)
		}
		return "all", fmt.Sprintf("trafficDistribution unset → all %d", a.Endpoints)
	}
	var steps []string
	for _, tr := range topology.Tiers(td, c) {
		n, where, kind := a.ReadyInZone, fmt.Sprintf("in topology zone %s (the pod's, node %s)", t.Zone, t.Node), "zone"
		if tr.Node != "" {
			n, where, kind = a.ReadyOnNode, fmt.Sprintf("on node %s (the pod's)", t.Node), "node"
		}
		if n > 0 {
			steps = append(steps, fmt.Sprintf("%s %s → answers %s", count(n, "ready endpoint"), where, those(n)))
			return kind, td + ": " + strings.Join(steps, "; ")
		}
		steps = append(steps, "none ready "+where)
	}
	if c.Zone == "" {
		steps = append(steps, fmt.Sprintf("node %s has no %s label", t.Node, topology.ZoneLabel))
	}
	return "all", td + ": " + strings.Join(steps, "; ") + fmt.Sprintf(" → all %d", a.Endpoints)
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func those(n int) string {
	if n == 1 {
		return "it"
	}
	return fmt.Sprintf("those %d", n)
}

// Report is the topology's -o json form, each Service routed.
func (t *Topology) Report() *TopologyReport {
	if t == nil {
		return nil
	}
	r := &TopologyReport{Node: t.Node, Zone: t.Zone, Services: []Answer{}, Error: t.Err}
	for _, s := range t.Services {
		r.Services = append(r.Services, Route(t, s))
	}
	return r
}

// writeTopology prints the topology report as # lines.
func writeTopology(b *strings.Builder, r *TopologyReport) {
	if r == nil {
		return
	}
	if r.Error != "" {
		fmt.Fprintf(b, "# headless names by topology: node %s\n#   unavailable: %s\n", r.Node, r.Error)
		return
	}
	zone := r.Zone
	if zone == "" {
		zone = "(no " + topology.ZoneLabel + " label)"
	}
	fmt.Fprintf(b, "# headless names by topology: node %s, topology zone %s\n", r.Node, zone)
	if len(r.Services) == 0 {
		b.WriteString("#   no headless Service in the pod's namespace (--service NAME names one)\n")
		return
	}
	for _, a := range r.Services {
		if a.Clusterset {
			fmt.Fprintf(b, "# %s (ServiceImport, its clusterset name): %s\n", a.Service, a.Reason)
		} else {
			fmt.Fprintf(b, "# %s: %s\n", a.Service, a.Reason)
		}
		if len(a.Answers) > 0 {
			fmt.Fprintf(b, "#      = %s\n", strings.Join(a.Answers, " "))
		}
	}
	b.WriteString("#   The same for SRV; an endpoint's own name (web-0.<service>) answers its pod. The cluster DNS places\n" +
		"#   the pod by node-local's topology option, else by its IP with --pods verified; unplaced, it answers all.\n")
}

// gatherTopology reads the pod's node and the Services it asks about:
// names (NAME or NAMESPACE/NAME), else the headless ones of its
// namespace. A failure is recorded, not returned.
func (e *Explainer) gatherTopology(ctx context.Context, pod *corev1.Pod, names []string) *Topology {
	t := &Topology{Node: pod.Spec.NodeName}
	sctx, cancel := e.step(ctx)
	node, err := e.Client.CoreV1().Nodes().Get(sctx, pod.Spec.NodeName, metav1.GetOptions{})
	cancel()
	if err != nil {
		t.Err = fmt.Sprintf("get node %s: %v", pod.Spec.NodeName, rbacHint(err, "get nodes"))
		return t
	}
	t.Zone = node.Labels[topology.ZoneLabel]
	var svcs []corev1.Service
	if len(names) == 0 {
		sctx, cancel := e.step(ctx)
		list, err := e.Client.CoreV1().Services(pod.Namespace).List(sctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			t.Err = fmt.Sprintf("list services in namespace %q: %v", pod.Namespace, rbacHint(err, "list services"))
			return t
		}
		for _, s := range list.Items {
			if s.Spec.ClusterIP == corev1.ClusterIPNone {
				svcs = append(svcs, s)
			}
		}
	}
	for _, n := range names {
		ns, name, ok := strings.Cut(n, "/")
		if !ok {
			ns, name = pod.Namespace, n
		}
		sctx, cancel := e.step(ctx)
		s, err := e.Client.CoreV1().Services(ns).Get(sctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			t.Err = fmt.Sprintf("get service %s/%s: %v", ns, name, rbacHint(err, "get services"))
			return t
		}
		svcs = append(svcs, *s)
	}
	slices.SortFunc(svcs, func(a, b corev1.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for i := range svcs {
		s, err := e.service(ctx, &svcs[i])
		if err != nil {
			t.Err = err.Error()
			return t
		}
		t.Services = append(t.Services, s)
	}
	if len(e.Imports) > 0 {
		if id, err := kubefeed.ClusterID(ctx, e.Client); err == nil {
			t.Cluster = id
		}
	}
	for _, n := range e.Imports {
		ns, name, ok := strings.Cut(n, "/")
		if !ok {
			ns, name = pod.Namespace, n
		}
		s, err := e.serviceImport(ctx, ns, name)
		if err != nil {
			t.Err = err.Error()
			return t
		}
		t.Services = append(t.Services, s)
	}
	return t
}

// serviceImport reads the ServiceImport ns/name, at the version the
// cluster DNS reads (kubefeed.ServiceImportVersion), and its imported
// EndpointSlices into the endpoints the clusterset zone serves.
func (e *Explainer) serviceImport(ctx context.Context, ns, name string) (Service, error) {
	out := Service{Namespace: ns, Name: name, Clusterset: true}
	if e.MCS == nil {
		return out, fmt.Errorf("service import %s/%s: no Multi-Cluster Services client", ns, name)
	}
	v, err := kubefeed.ServiceImportVersion(e.Client.Discovery())
	if err == nil && v == "" {
		err = errors.New("the API server serves no ServiceImports (multicluster.x-k8s.io)")
	}
	if err != nil {
		return out, fmt.Errorf("service import %s/%s: %w", ns, name, err)
	}
	sctx, cancel := e.step(ctx)
	defer cancel()
	if v == "v1beta1" {
		si, err := e.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(sctx, name, metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("get serviceimport %s/%s: %w", ns, name, rbacHint(err, "get serviceimports.multicluster.x-k8s.io"))
		}
		out.Headless = si.Spec.Type == mcsv1beta1.Headless
		if td := si.Spec.TrafficDistribution; td != nil {
			out.TrafficDistribution = *td
		}
	} else {
		si, err := e.MCS.MulticlusterV1alpha1().ServiceImports(ns).Get(sctx, name, metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("get serviceimport %s/%s: %w", ns, name, rbacHint(err, "get serviceimports.multicluster.x-k8s.io"))
		}
		out.Headless = si.Spec.Type == mcsv1alpha1.Headless
	}
	list, err := e.Client.DiscoveryV1().EndpointSlices(ns).List(sctx,
		metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err != nil {
		return out, fmt.Errorf("list endpointslices of service import %s/%s: %w", ns, name, rbacHint(err, "list endpointslices.discovery.k8s.io"))
	}
	for _, sl := range list.Items {
		eps := servedEndpoints([]discoveryv1.EndpointSlice{sl}, false)
		for i := range eps {
			eps[i].Cluster = sl.Labels[mcsv1beta1.LabelSourceCluster]
		}
		out.Endpoints = append(out.Endpoints, eps...)
	}
	return out, nil
}

// service reads svc's EndpointSlices into its served endpoints, as the
// cluster DNS's store serves them.
func (e *Explainer) service(ctx context.Context, svc *corev1.Service) (Service, error) {
	out := Service{Namespace: svc.Namespace, Name: svc.Name, Headless: svc.Spec.ClusterIP == corev1.ClusterIPNone}
	if td := svc.Spec.TrafficDistribution; td != nil {
		out.TrafficDistribution = *td
	}
	sctx, cancel := e.step(ctx)
	list, err := e.Client.DiscoveryV1().EndpointSlices(svc.Namespace).List(sctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	cancel()
	if err != nil {
		return out, fmt.Errorf("list endpointslices of service %s/%s: %w", svc.Namespace, svc.Name, rbacHint(err, "list endpointslices.discovery.k8s.io"))
	}
	out.Endpoints = servedEndpoints(list.Items, svc.Spec.PublishNotReadyAddresses)
	return out, nil
}

// servedEndpoints are the slices' IP addresses the cluster DNS serves:
// every address of a ready endpoint (no ready condition is ready), or of
// any endpoint with publishNotReady; an address once, in slice order.
func servedEndpoints(slices []discoveryv1.EndpointSlice, publishNotReady bool) []Endpoint {
	var out []Endpoint
	seen := map[netip.Addr]bool{}
	for _, sl := range slices {
		if sl.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, ep := range sl.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !publishNotReady {
				continue
			}
			e := Endpoint{Ready: ready}
			if ep.Zone != nil {
				e.Zone = *ep.Zone
			}
			if ep.NodeName != nil {
				e.Node = *ep.NodeName
			}
			for _, s := range ep.Addresses {
				a, err := netip.ParseAddr(s)
				if err != nil || seen[a.Unmap()] {
					continue
				}
				seen[a.Unmap()] = true
				e.Address = a.Unmap().String()
				out = append(out, e)
			}
		}
	}
	return out
}
