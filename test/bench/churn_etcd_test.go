package bench

// populateDirect: TestChurn's populate straight into the API server's
// etcd (DNSCONFIGURER_CHURN_POPULATE=etcd). Stock kube-apiserver creates
// Services ever slower as they grow in number, so 100k Services through
// the API take hours; written into etcd, they take about a minute. The
// objects are what the API server would have stored for populate's
// creates, so the servers list and watch the same cluster.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

const (
	// txnOps is how many keys one etcd transaction writes: etcd's
	// default --max-txn-ops.
	txnOps = 128
	// etcdWorkers is how many transactions are in flight.
	etcdWorkers = 4
	// directManager is the field manager of the objects written into
	// etcd: the user agent of test/apiserver's clients, which the API
	// server records for populate's creates.
	directManager = "dnsconfigurer-test"
	// allocatorManager is the field manager, and ipAllocator the
	// managed-by label, of the IPAddress objects of kube-apiserver's
	// ClusterIP allocator.
	allocatorManager = "kube-apiserver"
	ipAllocator      = "ipallocator.k8s.io"
	// staticBand is how many addresses at the start of the /12 Service
	// range kube-apiserver keeps for Services that ask for a cluster IP
	// (KEP-3070: min(max(16, size/16), 256)); "kubernetes" has
	// 10.96.0.1 there. Direct cluster IPs come from above it.
	staticBand = 256
	// checkPage is the page size of the List that checks what the API
	// server serves.
	checkPage = 5000
)

// keyValue is one object for etcd: its key and its stored form.
type keyValue struct {
	key   string
	value []byte
}

// kvWriter writes objects that must not exist yet, all in one
// transaction, and returns the transaction's revision: each object's
// resourceVersion.
type kvWriter interface {
	create(ctx context.Context, kvs []keyValue) (revision int64, err error)
}

// etcdWriter is kvWriter over an etcd client.
type etcdWriter struct{ kv clientv3.KV }

func (w etcdWriter) create(ctx context.Context, kvs []keyValue) (int64, error) {
	cmps := make([]clientv3.Cmp, len(kvs))
	ops := make([]clientv3.Op, len(kvs))
	for i, p := range kvs {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(p.key), "=", 0)
		ops[i] = clientv3.OpPut(p.key, string(p.value))
	}
	resp, err := w.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd transaction of %d keys from %s: %w", len(kvs), kvs[0].key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcd transaction of %d keys from %s: a key exists already", len(kvs), kvs[0].key)
	}
	return resp.Header.Revision, nil
}

// dialEtcd connects to the etcd at url until t ends.
func dialEtcd(t testing.TB, url string) etcdWriter {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client for %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return etcdWriter{cli}
}

// storageEncoder encodes an object as kube-apiserver stores it: "k8s\x00"
// and a protobuf runtime.Unknown that carries the apiVersion and kind.
var storageEncoder = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
	schema.GroupVersions{corev1.SchemeGroupVersion, discoveryv1.SchemeGroupVersion, networkingv1.SchemeGroupVersion})

// storageKey is where kube-apiserver keeps an object of resource (a
// cluster-scoped one when ns is empty).
func storageKey(resource, ns, name string) string {
	if ns == "" {
		return path.Join(apiserver.EtcdPrefix, resource, name)
	}
	return path.Join(apiserver.EtcdPrefix, resource, ns, name)
}

// storageKV is obj's key and stored form. It knows the kinds populate
// writes.
func storageKV(obj runtime.Object) (keyValue, error) {
	var key string
	switch o := obj.(type) {
	case *corev1.Service:
		key = storageKey("services/specs", o.Namespace, o.Name)
	case *discoveryv1.EndpointSlice:
		key = storageKey("endpointslices", o.Namespace, o.Name)
	case *networkingv1.IPAddress:
		key = storageKey("ipaddresses", "", o.Name)
	default:
		return keyValue{}, fmt.Errorf("no storage key for %T", obj)
	}
	b, err := runtime.Encode(storageEncoder, obj)
	if err != nil {
		return keyValue{}, fmt.Errorf("encode %s: %w", key, err)
	}
	return keyValue{key, b}, nil
}

// directMeta is the metadata the API server gives an object that manager
// created with the fields in fields (managedFields' FieldsV1 JSON).
func directMeta(name, ns string, labels map[string]string, created metav1.Time, manager, apiVersion, fields string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: ns, UID: uuid.NewUUID(), CreationTimestamp: created, Labels: labels,
		ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: apiVersion,
			Time: &created, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)},
		}},
	}
}

// directService is the Service, with one TCP port, that the API server
// stores for populate's create: clusterIP is its address, or
// corev1.ClusterIPNone for a headless Service.
func directService(name, ns, clusterIP string, port int32, created metav1.Time) *corev1.Service {
	families, policy := []corev1.IPFamily{corev1.IPv4Protocol}, corev1.IPFamilyPolicySingleStack
	var clusterIPField string
	if clusterIP == corev1.ClusterIPNone {
		// A headless Service without a selector gets both families,
		// even in a single-stack cluster.
		families, policy = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, corev1.IPFamilyPolicyRequireDualStack
		clusterIPField = `"f:clusterIP":{},`
	}
	fields := fmt.Sprintf(`{"f:spec":{%s"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":%d,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:sessionAffinity":{},"f:type":{}}}`,
		clusterIPField, port)
	internal := corev1.ServiceInternalTrafficPolicyCluster
	return &corev1.Service{
		ObjectMeta: directMeta(name, ns, nil, created, directManager, "v1", fields),
		Spec: corev1.ServiceSpec{
			Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)}},
			ClusterIP:             clusterIP,
			ClusterIPs:            []string{clusterIP},
			Type:                  corev1.ServiceTypeClusterIP,
			SessionAffinity:       corev1.ServiceAffinityNone,
			IPFamilies:            families,
			IPFamilyPolicy:        &policy,
			InternalTrafficPolicy: &internal,
		},
	}
}

// directIPAddress is the IPAddress object the ClusterIP allocator keeps
// for the cluster IP ip of Service ns/service. The allocator takes an
// address only by creating its IPAddress, so these keep it from giving a
// directly written address to a new Service.
func directIPAddress(ip, ns, service string, created metav1.Time) *networkingv1.IPAddress {
	labels := map[string]string{networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol), networkingv1.LabelManagedBy: ipAllocator}
	const fields = `{"f:metadata":{"f:labels":{".":{},"f:ipaddress.kubernetes.io/ip-family":{},"f:ipaddress.kubernetes.io/managed-by":{}}},"f:spec":{"f:parentRef":{".":{},"f:name":{},"f:namespace":{},"f:resource":{}}}}`
	return &networkingv1.IPAddress{
		ObjectMeta: directMeta(ip, "", labels, created, allocatorManager, "networking.k8s.io/v1", fields),
		Spec:       networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: ns, Name: service}},
	}
}

// directSlice is headlessSlice as the API server stores it.
func directSlice(name, ns string, i int, created metav1.Time) *discoveryv1.EndpointSlice {
	s := headlessSlice(name, ns, i)
	const fields = `{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:labels":{".":{},"f:endpointslice.kubernetes.io/managed-by":{},"f:kubernetes.io/service-name":{}}},"f:ports":{}}`
	meta := directMeta(s.Name, ns, s.Labels, created, directManager, "discovery.k8s.io/v1", fields)
	meta.Generation = 1
	s.ObjectMeta = meta
	return s
}

// directIPs are n distinct addresses of the IPv4 prefix p, from its
// skip-th address to the one before its last, spread at random (a fixed
// seed) as the allocator spreads them.
func directIPs(p netip.Prefix, skip, n int) ([]string, error) {
	if !p.Addr().Is4() || p.Bits() < 8 {
		return nil, fmt.Errorf("direct cluster IPs: want an IPv4 prefix of 8 bits or more, not %s", p)
	}
	size := 1 << (32 - p.Bits())
	avail := size - 1 - skip
	if n > avail {
		return nil, fmt.Errorf("direct cluster IPs: %d do not fit in %s above its first %d addresses (%d do)", n, p, skip, max(avail, 0))
	}
	base := p.Masked().Addr().As4()
	first := binary.BigEndian.Uint32(base[:]) + uint32(skip)
	r := rand.New(rand.NewPCG(3, 4))
	taken := make(map[int]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		off := r.IntN(avail)
		if taken[off] {
			continue
		}
		taken[off] = true
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], first+uint32(off))
		out = append(out, netip.AddrFrom4(b).String())
	}
	return out, nil
}

// putItems writes the objects of items 0 … n-1 into w, each item's
// objects (objs(i), perItem of them) in the same transaction, as many
// items a transaction as fit in txnOps, etcdWorkers transactions at a
// time. done is called with an item's objects and their revision once
// they are written.
func putItems(ctx context.Context, w kvWriter, n, perItem int, objs func(i int) []runtime.Object, done func(i int, objs []runtime.Object, rev int64)) error {
	per := max(txnOps/perItem, 1)
	return parallelN(ctx, etcdWorkers, (n+per-1)/per, func(ctx context.Context, b int) error {
		lo, hi := b*per, min((b+1)*per, n)
		items := make([][]runtime.Object, 0, hi-lo)
		kvs := make([]keyValue, 0, (hi-lo)*perItem)
		for i := lo; i < hi; i++ {
			o := objs(i)
			for _, obj := range o {
				kv, err := storageKV(obj)
				if err != nil {
					return err
				}
				kvs = append(kvs, kv)
			}
			items = append(items, o)
		}
		rev, err := w.create(ctx, kvs)
		if err != nil {
			return err
		}
		for k, o := range items {
			done(lo+k, o, rev)
		}
		return nil
	})
}

// populateDirect is populate with the Services, their IPAddress objects
// and the EndpointSlices written straight into kube-apiserver's etcd
// through w; the namespaces are created through client. The ClusterIP
// Services get cluster IPs from directIPs. It then checks that the API
// server serves every one of them.
func populateDirect(ctx context.Context, client kubernetes.Interface, w kvWriter, set churnSettings, logf func(string, ...any)) (*churnCluster, populateStats, error) {
	c := newChurnCluster(set.services, set.headless)
	st := populateStats{services: set.services, headless: set.headless, namespaces: c.namespaces, direct: true}
	start := time.Now()
	if err := c.createNamespaces(ctx, client); err != nil {
		return nil, st, err
	}
	st.namespacesTook = time.Since(start)
	ips, err := directIPs(netip.MustParsePrefix(churnServiceCIDR), staticBand, set.services)
	if err != nil {
		return nil, st, err
	}
	created := metav1.Now().Rfc3339Copy()

	err = c.populatePhases(set, &st, logf, func(serviceDone func()) error {
		return putItems(ctx, w, set.services, 2, func(i int) []runtime.Object {
			name, ns := fmt.Sprintf("svc-%d", i), c.namespace(i)
			return []runtime.Object{directService(name, ns, ips[i], servicePort, created), directIPAddress(ips[i], ns, name, created)}
		}, func(i int, objs []runtime.Object, _ int64) {
			svc := objs[0].(*corev1.Service)
			c.services[i] = expect{serviceName(svc.Name, svc.Namespace), []string{svc.Spec.ClusterIP}}
			serviceDone()
		})
	}, func(headlessDone func()) error {
		return putItems(ctx, w, set.headless, 2, func(i int) []runtime.Object {
			name, ns := fmt.Sprintf("hl-%d", i), c.namespace(i)
			return []runtime.Object{directService(name, ns, corev1.ClusterIPNone, headlessPort, created), directSlice(name, ns, i, created)}
		}, func(i int, objs []runtime.Object, rev int64) {
			svc, slice := objs[0].(*corev1.Service), objs[1].(*discoveryv1.EndpointSlice)
			slice.ResourceVersion = strconv.FormatInt(rev, 10)
			c.headless[i] = &headlessService{qname: serviceName(svc.Name, svc.Namespace), slice: slice}
			headlessDone()
		})
	})
	if err != nil {
		return nil, st, err
	}

	start = time.Now()
	st.servedServices, st.servedSlices, err = c.checkServed(ctx, client)
	st.checkTook = time.Since(start)
	return c, st, err
}

// checkServed waits up to servedWithin for the API server to serve every
// object written into etcd as written (checkServedOnce), checking every
// 100 ms: a direct write reaches the API server's watch cache a moment
// later. It returns the last check's counts and error.
func (c *churnCluster) checkServed(ctx context.Context, client kubernetes.Interface) (services, slices int, err error) {
	ctx, cancel := context.WithTimeout(ctx, servedWithin)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		services, slices, err = c.checkServedOnce(ctx, client)
		if err == nil {
			return services, slices, nil
		}
		select {
		case <-ctx.Done():
			return services, slices, err
		case <-tick.C:
		}
	}
}

// servedWithin bounds checkServed.
const servedWithin = 30 * time.Second

// checkServedOnce lists the Services and EndpointSlices of the churn
// namespaces through the API server, checkPage at a time, and gets the
// last ClusterIP Service and the last EndpointSlice. It fails unless the
// API server has every one as written.
func (c *churnCluster) checkServedOnce(ctx context.Context, client kubernetes.Interface) (services, slices int, err error) {
	want := make(map[string]string, len(c.services)+len(c.headless))
	for _, e := range c.services {
		want[e.qname] = e.want[0]
	}
	for _, h := range c.headless {
		want[h.qname] = corev1.ClusterIPNone
	}
	var errs []error
	opts := metav1.ListOptions{Limit: checkPage}
	for {
		list, err := client.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			return services, slices, fmt.Errorf("list services: %w", err)
		}
		for _, s := range list.Items {
			q := serviceName(s.Name, s.Namespace)
			ip, ok := want[q]
			if !ok {
				continue
			}
			services++
			delete(want, q)
			if s.Spec.ClusterIP != ip && len(errs) < 10 {
				errs = append(errs, fmt.Errorf("service %s/%s: cluster IP %q, written %q", s.Namespace, s.Name, s.Spec.ClusterIP, ip))
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	if len(want) > 0 {
		errs = append(errs, fmt.Errorf("%d services written but not listed", len(want)))
	}
	opts = metav1.ListOptions{Limit: checkPage}
	for {
		list, err := client.DiscoveryV1().EndpointSlices("").List(ctx, opts)
		if err != nil {
			return services, slices, fmt.Errorf("list endpointslices: %w", err)
		}
		for _, s := range list.Items {
			if strings.HasPrefix(s.Namespace, "churn-") {
				slices++
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	if slices != len(c.headless) {
		errs = append(errs, fmt.Errorf("%d endpointslices listed, %d written", slices, len(c.headless)))
	}
	if n := len(c.services); n > 0 {
		i := n - 1
		name, ns := fmt.Sprintf("svc-%d", i), c.namespace(i)
		svc, err := client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("get service %s/%s: %w", ns, name, err))
		case svc.Spec.ClusterIP != c.services[i].want[0] || svc.ResourceVersion == "":
			errs = append(errs, fmt.Errorf("service %s/%s: cluster IP %q, resourceVersion %q; written %s", ns, name, svc.Spec.ClusterIP, svc.ResourceVersion, c.services[i].want[0]))
		}
	}
	if n := len(c.headless); n > 0 {
		h := c.headless[n-1].slice
		got, err := client.DiscoveryV1().EndpointSlices(h.Namespace).Get(ctx, h.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("get endpointslice %s/%s: %w", h.Namespace, h.Name, err))
		case got.ResourceVersion != h.ResourceVersion || len(sliceAddrs(got)) != endpointsPerSlice:
			errs = append(errs, fmt.Errorf("endpointslice %s/%s: resourceVersion %q, %d ready addresses; written at revision %s", h.Namespace, h.Name, got.ResourceVersion, len(sliceAddrs(got)), h.ResourceVersion))
		}
	}
	return services, slices, errors.Join(errs...)
}
