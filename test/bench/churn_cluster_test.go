package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// churnZone is the cluster domain both servers serve.
	churnZone = "cluster.local."
	// servicesPerNamespace spreads the Services over namespaces (at most
	// maxNamespaces).
	servicesPerNamespace = 100
	maxNamespaces        = 1000
	// endpointsPerSlice is the size of each headless Service's one
	// EndpointSlice.
	endpointsPerSlice = 50
	// populateWorkers is how many creates are in flight while populating.
	populateWorkers = 32
	// attempts bounds the tries of one API write on transient errors.
	attempts = 6
	// servicePort and headlessPort are the one port of a ClusterIP and
	// of a headless Service.
	servicePort  = 80
	headlessPort = 8080
)

// endpointBase is the first endpoint address: endpoints are numbered in
// 10.128.0.0/9, outside the Service range.
var endpointBase = netip.MustParseAddr("10.128.0.1")

// endpointAddr is the n-th endpoint address (n below 2^23 - 2).
func endpointAddr(n uint32) string {
	b := endpointBase.As4()
	v := binary.BigEndian.Uint32(b[:]) + n
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b).String()
}

// expect is a name and the A records an answer for it must hold, exactly.
type expect struct {
	qname string
	want  []string // sorted
}

// churnCluster is what populate wrote and the churn changes.
type churnCluster struct {
	namespaces int
	services   []expect // the ClusterIP Services, in creation order
	headless   []*headlessService
	nextAddr   atomic.Uint32 // the next endpoint address
	nextNew    atomic.Int64  // the next churn-created Service
	cursor     atomic.Int64  // where claimSlice looks first
	retries    atomic.Int64  // API writes tried again
}

// headlessService is one headless Service and its EndpointSlice, as the
// API server last returned it. Only the holder of busy touches slice and
// moves.
type headlessService struct {
	qname string
	busy  atomic.Bool
	slice *discoveryv1.EndpointSlice
	moves int
}

func newChurnCluster(services, headless int) *churnCluster {
	return &churnCluster{
		namespaces: min(max((services+headless+servicesPerNamespace-1)/servicesPerNamespace, 1), maxNamespaces),
		services:   make([]expect, services),
		headless:   make([]*headlessService, headless),
	}
}

func (c *churnCluster) namespace(i int) string {
	return fmt.Sprintf("churn-%d", i%c.namespaces)
}

func serviceName(name, ns string) string {
	return name + "." + ns + ".svc." + churnZone
}

// expectations are every Service's name and answer: the ClusterIP ones,
// then the headless ones.
func (c *churnCluster) expectations() []expect {
	out := slices.Clone(c.services)
	for _, h := range c.headless {
		out = append(out, expect{h.qname, sliceAddrs(h.slice)})
	}
	return out
}

// queryNames are the ClusterIP Service names in a fixed random order, the
// query load's names.
func (c *churnCluster) queryNames() []string {
	names := make([]string, len(c.services))
	for i, j := range rand.New(rand.NewPCG(1, 2)).Perm(len(c.services)) {
		names[i] = c.services[j].qname
	}
	return names
}

// serviceDone records the time since start when the n-th of total
// ClusterIP Services completes a tenth of them.
func (st *populateStats) serviceDone(n, total int, start time.Time) {
	if k := n * 10 / total; k > 0 && (n-1)*10/total < k {
		st.deciles[k-1] = time.Since(start)
	}
}

// populateStats is how the API server took the objects.
type populateStats struct {
	services, headless, namespaces int
	servicesTook, headlessTook     time.Duration
	// deciles[k] is when the (k+1)-th tenth of the ClusterIP Services was
	// created, since the first create.
	deciles [10]time.Duration
	retries int64
	// direct: written into etcd (populateDirect), which fills the
	// fields below and not retries.
	direct                       bool
	namespacesTook, checkTook    time.Duration
	servedServices, servedSlices int // listed through the API afterwards
}

func (p populateStats) String() string {
	var b strings.Builder
	if p.direct {
		fmt.Fprintf(&b, "populate straight into etcd: %s namespaces through the API in %v; %s ClusterIP Services and their IPAddress objects in %v (%.0f/s); ",
			count(p.namespaces), p.namespacesTook.Round(time.Millisecond), count(p.services), p.servicesTook.Round(time.Millisecond), perSecond(p.services, p.servicesTook))
		fmt.Fprintf(&b, "%s headless Services with an EndpointSlice of %d in %v (%.0f/s); then listed through the API: %s Services, %s EndpointSlices in %v",
			count(p.headless), endpointsPerSlice, p.headlessTook.Round(time.Millisecond), perSecond(p.headless, p.headlessTook),
			count(p.servedServices), count(p.servedSlices), p.checkTook.Round(time.Millisecond))
		return b.String()
	}
	fmt.Fprintf(&b, "populate: %s namespaces; %s ClusterIP Services in %v (%.0f/s", count(p.namespaces), count(p.services),
		p.servicesTook.Round(time.Millisecond), perSecond(p.services, p.servicesTook))
	if p.services >= 10 {
		tenth := p.services / 10
		fmt.Fprintf(&b, "; first tenth %.0f/s, last tenth %.0f/s", perSecond(tenth, p.deciles[0]), perSecond(tenth, p.deciles[9]-p.deciles[8]))
	}
	fmt.Fprintf(&b, "); %s headless Services with an EndpointSlice of %d in %v (%.0f/s); API writes tried again: %d",
		count(p.headless), endpointsPerSlice, p.headlessTook.Round(time.Millisecond), perSecond(p.headless, p.headlessTook), p.retries)
	return b.String()
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// populate creates the namespaces, set.services ClusterIP Services and
// set.headless headless Services with their EndpointSlices, populateWorkers
// at a time, and logs the progress every 10 s.
func populate(ctx context.Context, client kubernetes.Interface, set churnSettings, logf func(string, ...any)) (*churnCluster, populateStats, error) {
	c := newChurnCluster(set.services, set.headless)
	st := populateStats{services: set.services, headless: set.headless, namespaces: c.namespaces}
	if err := c.createNamespaces(ctx, client); err != nil {
		return nil, st, err
	}

	err := c.populatePhases(set, &st, logf, func(serviceDone func()) error {
		return parallel(ctx, set.services, func(ctx context.Context, i int) error {
			svc, err := c.createService(ctx, client, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i), Namespace: c.namespace(i)},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: servicePort}}},
			})
			if err != nil {
				return err
			}
			c.services[i] = expect{serviceName(svc.Name, svc.Namespace), []string{svc.Spec.ClusterIP}}
			serviceDone()
			return nil
		})
	}, func(headlessDone func()) error {
		return parallel(ctx, set.headless, func(ctx context.Context, i int) error {
			h, err := c.createHeadless(ctx, client, i)
			c.headless[i] = h
			headlessDone()
			return err
		})
	})
	st.retries = c.retries.Load()
	return c, st, err
}

// populatePhases runs a populate's two phases, each timed into st with
// its progress logged: the ClusterIP Services (services calls serviceDone
// for each one), then the headless Services (headless calls headlessDone
// for each one).
func (c *churnCluster) populatePhases(set churnSettings, st *populateStats, logf func(string, ...any),
	services, headless func(done func()) error) error {
	var done atomic.Int64
	start := time.Now()
	stop := progress(logf, "ClusterIP Services", set.services, &done)
	err := services(func() { st.serviceDone(int(done.Add(1)), set.services, start) })
	stop()
	st.servicesTook = time.Since(start)
	if err != nil {
		return err
	}
	done.Store(0)
	start = time.Now()
	stop = progress(logf, "headless Services", set.headless, &done)
	c.nextAddr.Store(uint32(set.headless * endpointsPerSlice))
	err = headless(func() { done.Add(1) })
	stop()
	st.headlessTook = time.Since(start)
	return err
}

// createNamespaces creates the namespaces churn-0 … churn-<n-1>, one at
// a time.
func (c *churnCluster) createNamespaces(ctx context.Context, client kubernetes.Interface) error {
	for i := range c.namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace(i)}}
		err := c.retry(ctx, func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	return nil
}

// progress logs every 10 s how many of total are done, until stop.
func progress(logf func(string, ...any), what string, total int, done *atomic.Int64) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		var last int64
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			n := done.Load()
			logf("populate: %d of %d %s, %.0f/s over the last 10 s", n, total, what, float64(n-last)/10)
			last = n
		}
	})
	return func() { close(quit); wg.Wait() }
}

// parallel runs f for 0 … n-1, populateWorkers at a time, and returns the
// first error (the others stop taking work).
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	return parallelN(ctx, populateWorkers, n, f)
}

// parallelN is parallel with workers at a time.
func parallelN(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// retry calls f until it succeeds, fails for a reason that trying again
// cannot mend, or has failed attempts times, backing off from 100 ms.
func (c *churnCluster) retry(ctx context.Context, f func() error) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt == attempts || !transient(err) {
			return err
		}
		c.retries.Add(1)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		backoff *= 2
	}
}

// transient reports an error a second try may not see: the API server
// busy or timing out, or a broken connection.
func transient(err error) bool {
	var ne net.Error
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// createService creates svc, or gets it when an earlier try that timed
// out had created it.
func (c *churnCluster) createService(ctx context.Context, client kubernetes.Interface, svc *corev1.Service) (*corev1.Service, error) {
	var got *corev1.Service
	err := c.retry(ctx, func() error {
		var err error
		got, err = client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone && got.Spec.ClusterIP == "" {
		return nil, fmt.Errorf("service %s/%s: no cluster IP allocated", svc.Namespace, svc.Name)
	}
	return got, nil
}

// createHeadless creates headless Service i and its EndpointSlice of
// endpointsPerSlice ready endpoints, numbered from i*endpointsPerSlice.
func (c *churnCluster) createHeadless(ctx context.Context, client kubernetes.Interface, i int) (*headlessService, error) {
	name, ns := fmt.Sprintf("hl-%d", i), c.namespace(i)
	_, err := c.createService(ctx, client, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: "http", Port: headlessPort}},
		},
	})
	if err != nil {
		return nil, err
	}
	slice := headlessSlice(name, ns, i)
	var got *discoveryv1.EndpointSlice
	err = c.retry(ctx, func() error {
		var err error
		got, err = client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = client.DiscoveryV1().EndpointSlices(ns).Get(ctx, slice.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("endpointslice %s/%s: %w", ns, slice.Name, err)
	}
	return &headlessService{qname: serviceName(name, ns), slice: got}, nil
}

// headlessSlice is the EndpointSlice of headless Service i, name in ns:
// endpointsPerSlice ready endpoints, numbered from i*endpointsPerSlice.
func headlessSlice(name, ns string, i int) *discoveryv1.EndpointSlice {
	tcp, port, portName, ready := corev1.ProtocolTCP, int32(headlessPort), "http", true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: name,
			discoveryv1.LabelManagedBy:   "dnsconfigurer-churn-bench",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &tcp}},
	}
	for j := range endpointsPerSlice {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{endpointAddr(uint32(i*endpointsPerSlice + j))},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	return slice
}

// sliceAddrs are the sorted addresses of a slice's ready endpoints.
func sliceAddrs(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range s.Endpoints {
		if e.Conditions.Ready == nil || *e.Conditions.Ready {
			out = append(out, e.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}

// lanes are the churn's two kinds of write, taken in turn: create a
// ClusterIP Service, and move an endpoint of a headless Service not being
// waited on to a new address (or create a Service when every slice is
// busy).
func (c *churnCluster) lanes(client kubernetes.Interface) []writeFunc {
	create := func(ctx context.Context) (change, error) {
		n := int(c.nextNew.Add(1) - 1)
		svc, err := c.createService(ctx, client, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%d", n), Namespace: c.namespace(n)},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		})
		if err != nil {
			return change{}, err
		}
		return change{kind: kindService, expect: expect{serviceName(svc.Name, svc.Namespace), []string{svc.Spec.ClusterIP}}, written: time.Now()}, nil
	}
	move := func(ctx context.Context) (change, error) {
		if h := c.claimSlice(); h != nil {
			return c.moveEndpoint(ctx, client, h)
		}
		return create(ctx)
	}
	return []writeFunc{create, move}
}

// claimSlice marks the next headless Service not busy as busy and returns
// it; nil when all are.
func (c *churnCluster) claimSlice() *headlessService {
	n := len(c.headless)
	for range n {
		h := c.headless[int(c.cursor.Add(1)-1)%n]
		if h.busy.CompareAndSwap(false, true) {
			return h
		}
	}
	return nil
}

// moveEndpoint gives one endpoint of h's slice (each in turn) a new
// address. h stays busy until the change's done.
func (c *churnCluster) moveEndpoint(ctx context.Context, client kubernetes.Interface, h *headlessService) (change, error) {
	s := h.slice.DeepCopy()
	j := h.moves % len(s.Endpoints)
	s.Endpoints[j].Addresses = []string{endpointAddr(c.nextAddr.Add(1) - 1)}
	got, err := client.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		h.busy.Store(false)
		return change{}, fmt.Errorf("endpointslice %s/%s: %w", s.Namespace, s.Name, err)
	}
	h.slice, h.moves = got, h.moves+1
	return change{
		kind:    kindEndpoint,
		expect:  expect{h.qname, sliceAddrs(got)},
		written: time.Now(),
		done:    func() { h.busy.Store(false) },
	}, nil
}
