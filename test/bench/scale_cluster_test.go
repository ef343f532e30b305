package bench

// The cluster of TestScale: issue 71's 5,000-node load (Nodes in three
// zones, 30 Pods a node with IPs and node names, Services with their
// EndpointSlices, ClusterIP and headless, some with trafficDistribution,
// in a few hundred namespaces), written straight into the API server's
// etcd as populateDirect writes TestChurn's Services, and the changes made
// to it while it is measured.

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
)

// TestScale's load, the figures as defaults (after -args).
var (
	scaleNodes       = flag.Int("scale-nodes", 5000, "TestScale: Nodes, in three zones")
	scalePodsPerNode = flag.Int("scale-pods-per-node", 30, "TestScale: Pods a node (IPs and node names set)")
	scaleServices    = flag.Int("scale-services", 10000, "TestScale: Services, each with one EndpointSlice of its Pods")
	scaleHeadless    = flag.Int("scale-headless-every", 5, "TestScale: every n-th Service is headless")
	scaleTraffic     = flag.Int("scale-traffic-distribution", 500, "TestScale: Services with trafficDistribution PreferClose (and zone hints)")
	scaleNamespaces  = flag.Int("scale-namespaces", 300, "TestScale: namespaces the Services and Pods spread over")
)

// scaleZones are the Nodes' topology zones, each a third of them.
var scaleZones = []string{"zone-a", "zone-b", "zone-c"}

// scaleCluster is the objects of TestScale, numbered: Pod k runs on Node
// k/podsPerNode and backs Service k%services.
type scaleCluster struct {
	nodes, podsPerNode, services, headlessEvery, traffic, namespaces int
	clusterIPs                                                       []string // of Service i, "" for a headless one
	reserve                                                          []string // cluster IPs for Services written during outages
	nextReserve                                                      atomic.Int64
}

func newScaleCluster(nodes, podsPerNode, services, headlessEvery, traffic, namespaces int) (*scaleCluster, error) {
	c := &scaleCluster{nodes: nodes, podsPerNode: podsPerNode, services: services, headlessEvery: headlessEvery,
		traffic: min(traffic, services), namespaces: max(min(namespaces, services), 1)}
	if nodes < 3 || podsPerNode < 1 || services < 1 || c.pods() < services {
		return nil, fmt.Errorf("scale: %d nodes × %d pods for %d services: want 3 nodes or more and a Pod a Service", nodes, podsPerNode, services)
	}
	if c.pods() >= 1<<23-2 {
		return nil, fmt.Errorf("scale: %d pods do not fit in 10.128.0.0/9", c.pods())
	}
	const reserve = 20000
	ips, err := directIPs(netip.MustParsePrefix(churnServiceCIDR), staticBand, services+reserve)
	if err != nil {
		return nil, err
	}
	c.clusterIPs = make([]string, services)
	for i := range services {
		if !c.headless(i) {
			c.clusterIPs[i] = ips[i]
		}
	}
	c.reserve = ips[services:]
	return c, nil
}

func (c *scaleCluster) pods() int { return c.nodes * c.podsPerNode }

func (c *scaleCluster) headless(i int) bool {
	return c.headlessEvery > 0 && i%c.headlessEvery == c.headlessEvery-1
}

// trafficDistribution: every services/traffic-th Service prefers close
// endpoints.
func (c *scaleCluster) trafficDistribution(i int) bool {
	return c.traffic > 0 && i%(c.services/c.traffic) == 0 && i/(c.services/c.traffic) < c.traffic
}

func (c *scaleCluster) namespace(i int) string { return fmt.Sprintf("scale-%d", i%c.namespaces) }

func (c *scaleCluster) serviceName(i int) string {
	if c.headless(i) {
		return fmt.Sprintf("hl-%d", i)
	}
	return fmt.Sprintf("svc-%d", i)
}

func (c *scaleCluster) nodeName(n int) string { return fmt.Sprintf("node-%d", n) }

// zoneOf Node n: the first third of the Nodes in the first zone, and so on.
func (c *scaleCluster) zoneOf(n int) string { return scaleZones[n*len(scaleZones)/c.nodes] }

// nodeIP is Node n's address, in 10.0.0.0/10.
func nodeIP(n int) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 10<<24|uint32(n+1))
	return netip.AddrFrom4(b).String()
}

// podIP is Pod k's address, in 10.128.0.0/9.
func podIP(k int) string { return endpointAddr(uint32(k)) }

// podOf is Pod k's name and namespace: its Service's, numbered.
func (c *scaleCluster) podOf(k int) (name, ns string) {
	i := k % c.services
	return fmt.Sprintf("%s-%d", c.serviceName(i), k/c.services), c.namespace(i)
}

// podsOf are the Pods backing Service i.
func (c *scaleCluster) podsOf(i int) []int {
	var ks []int
	for k := i; k < c.pods(); k += c.services {
		ks = append(ks, k)
	}
	return ks
}

// want is the answer to Service i's name: its cluster IP, or its Pods'
// addresses when headless.
func (c *scaleCluster) want(i int) expect {
	q := serviceName(c.serviceName(i), c.namespace(i))
	if !c.headless(i) {
		return expect{q, []string{c.clusterIPs[i]}}
	}
	var ips []string
	for _, k := range c.podsOf(i) {
		ips = append(ips, podIP(k))
	}
	return expect{q, sortedCopy(ips)}
}

// podExpect is Pod k's name in the pod zone and its address.
func (c *scaleCluster) podExpect(k int) expect {
	ip := netip.MustParseAddr(podIP(k)).As4()
	_, ns := c.podOf(k)
	return expect{fmt.Sprintf("%d-%d-%d-%d.%s.pod.%s", ip[0], ip[1], ip[2], ip[3], ns, churnZone), []string{podIP(k)}}
}

// queryNames are the names of the steady load: Services of both kinds and
// Pods, spread over the cluster; none of them is changed by the run.
func (c *scaleCluster) queryNames(n int) []expect {
	var out []expect
	for j := range n {
		switch j % 4 {
		case 0, 1:
			out = append(out, c.want(j*7919%c.services))
		case 2:
			i := j * 7919 % c.services
			for !c.headless(i) && c.headlessEvery > 0 {
				i = (i + 1) % c.services
			}
			out = append(out, c.want(i))
		default:
			out = append(out, c.podExpect(j*104729%c.pods()))
		}
	}
	return out
}

func sortedCopy(a []string) []string {
	out := slices.Clone(a)
	slices.Sort(out) // as strings, as expect.check sorts
	return out
}

const nodeFields = `{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{},"f:node.kubernetes.io/instance-type":{},"f:topology.kubernetes.io/region":{},"f:topology.kubernetes.io/zone":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.244.0.0/24\"":{}},"f:providerID":{}}}`

// scaleNode is Node n as a kubelet registers and reports it: labels with
// its zone, addresses, capacity, conditions and a few images.
func (c *scaleCluster) scaleNode(n int, created metav1.Time) *corev1.Node {
	name := c.nodeName(n)
	labels := map[string]string{
		"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "n2-standard-8",
		"topology.kubernetes.io/region": "region-1", "topology.kubernetes.io/zone": c.zoneOf(n),
	}
	node := &corev1.Node{
		ObjectMeta: directMeta(name, "", labels, created, "kubelet", "v1", nodeFields),
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 64+n/256, n%256), PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", 64+n/256, n%256)},
			ProviderID: "gce://project/" + c.zoneOf(n) + "/" + name},
	}
	node.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	now := created
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: now, LastTransitionTime: now, Reason: reason, Message: msg}
	}
	node.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res, Phase: "",
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP(n)}, {Type: corev1.NodeHostName, Address: name}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{MachineID: string(uuid.NewUUID()), SystemUUID: string(uuid.NewUUID()), BootID: string(uuid.NewUUID()),
			KernelVersion: "6.1.0-28-cloud-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://2.1.4",
			KubeletVersion: "v1.34.0", OperatingSystem: "linux", Architecture: "amd64"},
	}
	for j, img := range []string{"registry.k8s.io/kube-proxy:v1.34.0", "registry.k8s.io/pause:3.10", "registry.k8s.io/coredns/coredns:v1.12.1",
		"docker.io/library/nginx:1.27", "registry.k8s.io/e2e-test-images/agnhost:2.53"} {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
			Names: []string{img, img[:len(img)-4] + "@sha256:" + fmt.Sprintf("%064x", j+1)}, SizeBytes: int64(10_000_000 * (j + 1)),
		})
	}
	return node
}

const podFields = `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`

// scalePod is Pod k, running on its Node with its address, as the
// scheduler and the kubelet leave it.
func (c *scaleCluster) scalePod(k int, created metav1.Time) *corev1.Pod {
	name, ns := c.podOf(k)
	i := k % c.services
	n := k / c.podsPerNode
	labels := map[string]string{"app": c.serviceName(i), "pod-template-hash": "5d4f8b7c9"}
	meta := directMeta(name, ns, labels, created, "kube-controller-manager", "v1", podFields)
	meta.GenerateName = c.serviceName(i) + "-5d4f8b7c9-"
	ctrl := true
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: c.serviceName(i) + "-5d4f8b7c9",
		UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)), Controller: &ctrl, BlockOwnerDeletion: &ctrl}}
	grace := int64(30)
	tolerate := int64(300)
	ready := true
	ip := podIP(k)
	pod := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"serve-hostname"},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, DNSPolicy: corev1.DNSClusterFirst,
			ServiceAccountName: "default", NodeName: c.nodeName(n), SecurityContext: &corev1.PodSecurityContext{},
			SchedulerName: corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate},
			},
		},
	}
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: created}
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled)},
		HostIP:     nodeIP(n), HostIPs: []corev1.HostIP{{IP: nodeIP(n)}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &created, QOSClass: corev1.PodQOSBurstable,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Ready: true, Started: &ready, RestartCount: 0,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}},
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", ImageID: "registry.k8s.io/e2e-test-images/agnhost@sha256:" + fmt.Sprintf("%064x", 7),
			ContainerID: fmt.Sprintf("containerd://%064x", k),
		}},
	}
	return pod
}

const scaleServiceFields = `{"f:spec":{"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}`

// scaleService is Service i with its selector, and its IPAddress when it
// has a cluster IP.
func (c *scaleCluster) scaleService(i int, created metav1.Time) []runtime.Object {
	name, ns := c.serviceName(i), c.namespace(i)
	ip := c.clusterIPs[i]
	families, policy := []corev1.IPFamily{corev1.IPv4Protocol}, corev1.IPFamilyPolicySingleStack
	if ip == "" {
		ip = corev1.ClusterIPNone
	}
	internal := corev1.ServiceInternalTrafficPolicyCluster
	svc := &corev1.Service{
		ObjectMeta: directMeta(name, ns, map[string]string{"app": name}, created, directManager, "v1", scaleServiceFields),
		Spec: corev1.ServiceSpec{
			Ports:     []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			Selector:  map[string]string{"app": name},
			ClusterIP: ip, ClusterIPs: []string{ip}, Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
			IPFamilies: families, IPFamilyPolicy: &policy, InternalTrafficPolicy: &internal,
		},
	}
	if c.trafficDistribution(i) {
		td := corev1.ServiceTrafficDistributionPreferClose
		svc.Spec.TrafficDistribution = &td
	}
	if ip == corev1.ClusterIPNone {
		return []runtime.Object{svc}
	}
	return []runtime.Object{svc, directIPAddress(ip, ns, name, created)}
}

const scaleSliceFields = `{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:endpointslice.kubernetes.io/managed-by":{},"f:kubernetes.io/service-name":{}},"f:ownerReferences":{}},"f:ports":{}}`

// scaleSlice is Service i's EndpointSlice, as the EndpointSlice
// controller writes it: each of its Pods with node name, zone and target,
// and zone hints for a Service with trafficDistribution.
func (c *scaleCluster) scaleSlice(i int, created metav1.Time) *discoveryv1.EndpointSlice {
	name, ns := c.serviceName(i), c.namespace(i)
	tcp, port, portName, ready := corev1.ProtocolTCP, int32(8080), "http", true
	labels := map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	meta := directMeta(name+"-abcde", ns, labels, created, "kube-controller-manager", "discovery.k8s.io/v1", scaleSliceFields)
	meta.GenerateName = name + "-"
	meta.Generation = 1
	s := &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &tcp}}}
	for _, k := range c.podsOf(i) {
		pname, _ := c.podOf(k)
		n := k / c.podsPerNode
		node, zone := c.nodeName(n), c.zoneOf(n)
		e := discoveryv1.Endpoint{
			Addresses:  []string{podIP(k)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: new(bool)},
			NodeName:   &node, Zone: &zone,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pname, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0001-%012d", k))},
		}
		if c.trafficDistribution(i) {
			e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

// scaleKV is obj's etcd key and stored form: storageKV's kinds, Pods and
// Nodes ("minions").
func scaleKV(obj runtime.Object) (keyValue, error) {
	var key string
	switch o := obj.(type) {
	case *corev1.Pod:
		key = storageKey("pods", o.Namespace, o.Name)
	case *corev1.Node:
		key = storageKey("minions", "", o.Name)
	default:
		return storageKV(obj)
	}
	b, err := runtime.Encode(storageEncoder, obj)
	if err != nil {
		return keyValue{}, fmt.Errorf("encode %s: %w", key, err)
	}
	return keyValue{key, b}, nil
}

// putScale writes the objects of items 0 … n-1 (objs(i)) into w, as many
// items a transaction as fit in txnOps, etcdWorkers transactions at a
// time, and logs progress every 10 s.
func putScale(ctx context.Context, w kvWriter, what string, n int, objs func(i int) []runtime.Object, logf func(string, ...any)) error {
	if n == 0 {
		return nil
	}
	per := max(txnOps/len(objs(0)), 1)
	var done atomic.Int64
	stop := progress(logf, what, n, &done)
	defer stop()
	return parallelN(ctx, etcdWorkers, (n+per-1)/per, func(ctx context.Context, b int) error {
		lo, hi := b*per, min((b+1)*per, n)
		var kvs []keyValue
		for i := lo; i < hi; i++ {
			for _, obj := range objs(i) {
				kv, err := scaleKV(obj)
				if err != nil {
					return err
				}
				kvs = append(kvs, kv)
			}
		}
		if _, err := w.create(ctx, kvs); err != nil {
			return err
		}
		done.Add(int64(hi - lo))
		return nil
	})
}

// populateScale creates the namespaces through the API and writes the
// Nodes, Pods, Services (and IPAddress objects) and EndpointSlices into
// etcd, then waits until the API server lists as many of each.
func (c *scaleCluster) populate(ctx context.Context, client kubernetes.Interface, w kvWriter, logf func(string, ...any)) error {
	start := time.Now()
	nsc := &churnCluster{}
	for i := range c.namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace(i)}}
		if err := nsc.retry(ctx, func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	logf("populate: %d namespaces through the API in %v", c.namespaces, time.Since(start).Round(time.Millisecond))
	created := metav1.Now().Rfc3339Copy()
	steps := []struct {
		what string
		n    int
		objs func(int) []runtime.Object
	}{
		{"Nodes", c.nodes, func(n int) []runtime.Object { return []runtime.Object{c.scaleNode(n, created)} }},
		{"Services", c.services, func(i int) []runtime.Object { return c.scaleService(i, created) }},
		{"EndpointSlices", c.services, func(i int) []runtime.Object { return []runtime.Object{c.scaleSlice(i, created)} }},
		{"Pods", c.pods(), func(k int) []runtime.Object { return []runtime.Object{c.scalePod(k, created)} }},
	}
	for _, st := range steps {
		t0 := time.Now()
		// A transaction's items are all of one kind, so objs(0) tells
		// putScale how many keys an item writes; a headless Service has
		// no IPAddress, which only makes its transaction smaller.
		if err := putScale(ctx, w, st.what, st.n, st.objs, logf); err != nil {
			return fmt.Errorf("populate %s: %w", st.what, err)
		}
		logf("populate: %d %s into etcd in %v", st.n, st.what, time.Since(t0).Round(time.Millisecond))
	}
	t0 := time.Now()
	if err := c.checkServed(ctx, client); err != nil {
		return err
	}
	logf("populate: the API server lists every object %v after the writes", time.Since(t0).Round(time.Millisecond))
	return nil
}

// checkServed waits up to a few minutes for the API server to list the
// objects written: counts of Nodes, Pods, Services and EndpointSlices.
func (c *scaleCluster) checkServed(ctx context.Context, client kubernetes.Interface) error {
	want := map[string]int{"nodes": c.nodes, "pods": c.pods(), "services": c.services, "endpointslices": c.services}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		got, err := c.countServed(ctx, client)
		if err == nil {
			ok := true
			for k, n := range want {
				ok = ok && got[k] >= n
			}
			if ok {
				return nil
			}
			err = fmt.Errorf("listed %v, want %v", got, want)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("populate: the API server does not list every object written: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// countServed counts what the API server lists of each kind (in the
// scale namespaces for the namespaced ones), 5,000 a page.
func (c *scaleCluster) countServed(ctx context.Context, client kubernetes.Interface) (map[string]int, error) {
	got := map[string]int{}
	page := func(kind string, list func(metav1.ListOptions) (int, string, error)) error {
		opts := metav1.ListOptions{Limit: checkPage}
		for {
			n, cont, err := list(opts)
			if err != nil {
				return fmt.Errorf("list %s: %w", kind, err)
			}
			got[kind] += n
			if opts.Continue = cont; cont == "" {
				return nil
			}
		}
	}
	inScale := func(ns string) bool { return len(ns) > 6 && ns[:6] == "scale-" }
	err := page("nodes", func(o metav1.ListOptions) (int, string, error) {
		l, err := client.CoreV1().Nodes().List(ctx, o)
		if err != nil {
			return 0, "", err
		}
		return len(l.Items), l.Continue, nil
	})
	if err == nil {
		err = page("pods", func(o metav1.ListOptions) (int, string, error) {
			l, err := client.CoreV1().Pods("").List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			n := 0
			for _, p := range l.Items {
				if inScale(p.Namespace) {
					n++
				}
			}
			return n, l.Continue, nil
		})
	}
	if err == nil {
		err = page("services", func(o metav1.ListOptions) (int, string, error) {
			l, err := client.CoreV1().Services("").List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			n := 0
			for _, s := range l.Items {
				if inScale(s.Namespace) && (s.Name[:3] == "svc" || s.Name[:3] == "hl-") {
					n++
				}
			}
			return n, l.Continue, nil
		})
	}
	if err == nil {
		err = page("endpointslices", func(o metav1.ListOptions) (int, string, error) {
			l, err := client.DiscoveryV1().EndpointSlices("").List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			n := 0
			for _, s := range l.Items {
				if inScale(s.Namespace) {
					n++
				}
			}
			return n, l.Continue, nil
		})
	}
	return got, err
}

// outageService is a new ClusterIP Service written straight into etcd
// (with its IPAddress) while the API server is down: the change the
// servers must answer once it is back. n numbers it.
func (c *scaleCluster) outageService(n int, created metav1.Time) (expect, []runtime.Object) {
	idx := int(c.nextReserve.Add(1) - 1)
	ip := c.reserve[idx%len(c.reserve)]
	name, ns := "out-"+strconv.Itoa(n), c.namespace(n)
	internal := corev1.ServiceInternalTrafficPolicyCluster
	policy := corev1.IPFamilyPolicySingleStack
	svc := &corev1.Service{
		ObjectMeta: directMeta(name, ns, nil, created, directManager, "v1", scaleServiceFields),
		Spec: corev1.ServiceSpec{
			Ports:     []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			ClusterIP: ip, ClusterIPs: []string{ip}, Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &policy, InternalTrafficPolicy: &internal,
		},
	}
	return expect{serviceName(name, ns), []string{ip}}, []runtime.Object{svc, directIPAddress(ip, ns, name, created)}
}

// putObjects writes objs into w in one transaction.
func putObjects(ctx context.Context, w kvWriter, objs []runtime.Object) error {
	var kvs []keyValue
	for _, o := range objs {
		kv, err := scaleKV(o)
		if err != nil {
			return err
		}
		kvs = append(kvs, kv)
	}
	_, err := w.create(ctx, kvs)
	return err
}

// apiService creates a ClusterIP Service through the API server (it
// allocates the address) and returns what its name must answer.
func apiService(ctx context.Context, client kubernetes.Interface, name, ns string) (expect, error) {
	svc, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return expect{}, err
	}
	return expect{serviceName(name, ns), []string{svc.Spec.ClusterIP}}, nil
}
