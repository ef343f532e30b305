package clusterdns

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/feed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
)

// The reply cache property: a Handler whose packed reply cache has lived
// through any sequence of changes, applied one object at a time as the
// informer feed applies them and published in batches, with queries in
// between, answers every question as a Handler over a store built fresh
// from the objects last published does. A sequence is decoded from bytes,
// so FuzzReplyCacheChurn keeps its corpus and TestReplyCacheProperty replays
// seeded ones; a failure is shrunk to a minimal sequence and printed.

// The pools the objects are drawn from: small, so that changes collide
// (one PTR name for two Services, a slice moving between Services, an
// ExternalName pointing at a Service that comes and goes).
var (
	propNS       = []string{"a", "b"}
	propNSObj    = []string{"a", "b", "c"}
	propSvc      = []string{"web", "db", "hl", "ext"}
	propSlices   = []string{"s1", "s2", "s3"}
	propPods     = []string{"p1", "p2"}
	propV4       = []string{"10.0.0.1", "10.0.0.2", "10.0.1.1", "10.96.0.10"}
	propV6       = []string{"fd00::1", "fd00::2", "fd00::a"}
	propHosts    = []string{"", "", "", "h1", "h2", "h1", "h2", "Bad_Host"}
	propTargets  = []string{"web.a.svc.cluster.local", "db.b.svc.cluster.local", "hl.a.svc.cluster.local.", "ext.b.svc.cluster.local", "h1.hl.a.svc.cluster.local", "WEB.A.svc.cluster.local", "example.com"}
	propSvcPorts = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Protocol: corev1.ProtocolTCP, Port: 81},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53}}
)

// propConfig is the server a sequence runs against: the store options and
// the handler options that make answers depend on other names.
type propConfig struct {
	pods        store.PodMode
	ignoreEmpty bool
	podNames    bool
	noEndpoints bool
	onlyNS      bool // the Namespaces filter: a only
	lb          bool
	smallCache  bool // a reply cache of 4 KiB: generations turn over
	reverse     bool
	rewrites    bool
	amp         bool
	static      bool
	udpLimit    int // WithUDPAnswerLimit
}

func (c propConfig) String() string {
	return fmt.Sprintf("pods=%s ignoreEmpty=%v podNames=%v noEndpoints=%v onlyNS=%v lb=%v smallCache=%v reverse=%v rewrites=%v amp=%v static=%v udpLimit=%d",
		c.pods, c.ignoreEmpty, c.podNames, c.noEndpoints, c.onlyNS, c.lb, c.smallCache, c.reverse, c.rewrites, c.amp, c.static, c.udpLimit)
}

func (c propConfig) storeOptions() store.Options {
	o := store.Options{Zone: "cluster.local", TTL: 5, Pods: c.pods, IgnoreEmptyService: c.ignoreEmpty,
		EndpointPodNames: c.podNames, NoEndpoints: c.noEndpoints}
	if c.onlyNS {
		o.Namespaces = []string{"a"}
	}
	return o
}

// propStatic is a static source (pkg/hosts): a PTR the snapshot may come to
// shadow, and a name outside the zone.
type propStatic struct{}

func (propStatic) Lookup(name string, qtype uint16) ([]dns.RR, bool) {
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 60}
	}
	switch name {
	case "1.0.0.10.in-addr.arpa.":
		if qtype == dns.TypePTR {
			return []dns.RR{&dns.PTR{Hdr: hdr(dns.TypePTR), Ptr: "static-host."}}, true
		}
		return nil, true
	case "static.example.":
		if qtype == dns.TypeA {
			return []dns.RR{&dns.A{Hdr: hdr(dns.TypeA), A: []byte{192, 0, 2, 1}}}, true
		}
		return nil, true
	}
	return nil, false
}

// handler is the Handler a server with c builds over st (cmd's options,
// without a forwarder: names outside the zone are REFUSED).
func (c propConfig) handler(tb testing.TB, st *store.Store) *Handler {
	ap, err := WithAutopath(0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	opts := []Option{WithLoadBalance(c.lb), WithUDPAnswerLimit(c.udpLimit), ap, WithWireMisses()}
	if c.smallCache {
		opts = append(opts, WithReplyCache(4096))
	}
	if c.reverse {
		rz, err := WithReverseZones([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("fd00::/120")})
		if err != nil {
			tb.Fatal(err)
		}
		opts = append(opts, rz)
	}
	if c.rewrites {
		rw, err := WithRewrites([]v1alpha1.Rewrite{
			{From: "alias.example", To: "db.a.svc.cluster.local"},
			{Match: "suffix", From: ".corp", To: ".svc.cluster.local"},
		})
		if err != nil {
			tb.Fatal(err)
		}
		opts = append(opts, rw)
	}
	if c.amp {
		a, err := NewAmplification(10)
		if err != nil {
			tb.Fatal(err)
		}
		opts = append(opts, WithAmplification(a))
	}
	if c.static {
		opts = append(opts, WithStatic(propStatic{}))
	}
	return NewHandler("cluster.local", st, opts...)
}

// propQuestion is a question of the fixed set, with the keys of the objects
// its answer can depend on (for "every name touched").
type propQuestion struct {
	q    dns.Question
	keys []string
}

// propQuestions is every question the pools can make an answer for (and
// some they cannot), with the types the zone answers.
var propQuestions = func() []propQuestion {
	var out []propQuestion
	add := func(name string, keys ...string) {
		for _, t := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME, dns.TypeANY, dns.TypeTXT} {
			out = append(out, propQuestion{dns.Question{Name: name, Qtype: t, Qclass: dns.ClassINET}, keys})
		}
	}
	for _, ns := range propNS {
		for _, svc := range propSvc {
			k := "svc/" + ns + "/" + svc
			base := svc + "." + ns + ".svc.cluster.local."
			for _, p := range []string{"", "_http._tcp.", "_dns._udp.", "_dns-tcp._tcp.", "_tcp.", "_udp.", "h1.", "h2.", "pod-1.", "10-0-0-1.", "fd00--2."} {
				add(p+base, k)
			}
		}
		add(ns+".svc.cluster.local.", "ns/"+ns)
		add(ns+".pod.cluster.local.", "ns/"+ns)
		add("10-0-0-2."+ns+".pod.cluster.local.", "ns/"+ns)
		add("fd00--1."+ns+".pod.cluster.local.", "ns/"+ns)
	}
	add("c.svc.cluster.local.", "ns/c")
	add("web.a.corp.", "svc/a/web")
	add("web.corp.", "any")
	add("alias.example.", "svc/a/db")
	add("static.example.", "static")
	for _, ip := range append(slices.Clone(propV4), propV6...) {
		add(store.ReverseName(netip.MustParseAddr(ip)), "ip/"+ip)
	}
	six := store.ReverseName(netip.MustParseAddr("fd00::1"))
	for _, n := range []string{"0.0.10.in-addr.arpa.", "1.0.10.in-addr.arpa.", "0.10.in-addr.arpa.", "10.in-addr.arpa.", "0.96.10.in-addr.arpa.",
		"9.9.0.10.in-addr.arpa.", six[2:], six[32:], six[60:]} {
		add(n, "ip")
	}
	for _, n := range []string{"cluster.local.", "svc.cluster.local.", "pod.cluster.local.", "dns-version.cluster.local.", "nx.cluster.local.",
		"web.search.a.cluster.local.ap.k8s.io.", "db.b.search.a.cluster.local.ap.k8s.io.", "h1.hl.search.b.cluster.local.ap.k8s.io."} {
		add(n, "any")
	}
	for _, n := range []string{"cluster.local.", "10.in-addr.arpa.", "0.10.in-addr.arpa.", six[60:]} {
		for _, t := range []uint16{dns.TypeSOA, dns.TypeNS} {
			out = append(out, propQuestion{dns.Question{Name: n, Qtype: t, Qclass: dns.ClassINET}, []string{"any"}})
		}
	}
	return out
}()

// propKeys are the keys of the questions a sweep asks (those of one
// Service or one address), sorted.
var propKeys = func() []string {
	set := map[string]bool{}
	for _, pq := range propQuestions {
		for _, k := range pq.keys {
			if strings.HasPrefix(k, "svc/") || strings.HasPrefix(k, "ip/") {
				set[k] = true
			}
		}
	}
	return slices.Sorted(mapsKeys(set))
}()

// sweepTypes are the types a sweep asks.
var sweepTypes = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeANY}

// propKind is what one step of a sequence does.
type propKind uint8

const (
	opSet     propKind = iota // apply an object as a watch Add/Update does
	opDelete                  // a watch Delete
	opReapply                 // an object the feed already has, again (resync, relist)
	opPublish                 // the feed's publish after a batch of changes
	opQuery                   // one question to the handler under test
	opCheck                   // a sample of questions, each compared with a fresh build
	opSweep                   // every question of one object's names, each compared (and so cached)
)

// propOp is one step. Set and delete carry the API object, so a step stands
// alone and a sequence can be shrunk by dropping steps.
type propOp struct {
	kind  propKind
	obj   metav1.Object
	q     int // the question (opQuery) or the sample's seed (opCheck)
	upper bool
	edns  bool
	tcp   bool
	wire  bool // opQuery: through AnswerWire first, as the UDP listener
}

func (o propOp) String() string {
	switch o.kind {
	case opSet, opDelete:
		verb := map[propKind]string{opSet: "set", opDelete: "delete"}[o.kind]
		return verb + " " + describeObject(o.obj)
	case opReapply:
		return fmt.Sprintf("reapply #%d", o.q)
	case opPublish:
		return "publish"
	case opQuery:
		q := propQuestions[o.q%len(propQuestions)].q
		return fmt.Sprintf("query %s %s upper=%v edns=%v tcp=%v wire=%v", q.Name, dns.TypeToString[q.Qtype], o.upper, o.edns, o.tcp, o.wire)
	}
	if o.kind == opSweep {
		return fmt.Sprintf("sweep %d", o.q)
	}
	return fmt.Sprintf("check sample %d", o.q)
}

func describeObject(obj metav1.Object) string {
	key := obj.GetNamespace() + "/" + obj.GetName()
	switch v := obj.(type) {
	case *corev1.Service:
		return fmt.Sprintf("Service %s type=%s clusterIPs=%v externalName=%q ports=%v publishNotReady=%v", key, v.Spec.Type,
			v.Spec.ClusterIPs, v.Spec.ExternalName, portsString(v.Spec.Ports), v.Spec.PublishNotReadyAddresses)
	case *discoveryv1.EndpointSlice:
		var eps []string
		for _, e := range v.Endpoints {
			s := fmt.Sprintf("%v", e.Addresses)
			if e.Hostname != nil {
				s += " host=" + *e.Hostname
			}
			if e.Conditions.Ready != nil {
				s += fmt.Sprintf(" ready=%v", *e.Conditions.Ready)
			}
			if e.Conditions.Terminating != nil {
				s += fmt.Sprintf(" terminating=%v", *e.Conditions.Terminating)
			}
			if e.TargetRef != nil {
				s += " pod=" + e.TargetRef.Name
			}
			eps = append(eps, "{"+s+"}")
		}
		var ports []string
		for _, p := range v.Ports {
			ports = append(ports, fmt.Sprintf("%s/%s/%d", *p.Name, *p.Protocol, *p.Port))
		}
		return fmt.Sprintf("EndpointSlice %s service=%q %s ports=%v endpoints=%v", key, v.Labels[discoveryv1.LabelServiceName], v.AddressType, ports, eps)
	case *corev1.Pod:
		return fmt.Sprintf("Pod %s phase=%s ips=%v", key, v.Status.Phase, v.Status.PodIPs)
	}
	return "Namespace " + obj.GetName()
}

func portsString(ps []corev1.ServicePort) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%s/%d", p.Name, p.Protocol, p.Port))
	}
	return out
}

// propBytes reads a sequence's bytes; past the end it reads zeros.
type propBytes struct {
	b []byte
	i int
}

func (r *propBytes) next() int {
	if r.i >= len(r.b) {
		r.i++
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func (r *propBytes) intn(n int) int         { return r.next() % n }
func (r *propBytes) pick(s []string) string { return s[r.intn(len(s))] }
func (r *propBytes) oneIn(n int) bool       { return r.intn(n) == 0 }
func (r *propBytes) done() bool             { return r.i >= len(r.b) }

func ptrTo[T any](v T) *T { return &v }

// maxPropOps bounds a sequence, so a long fuzz input costs what a seeded
// run does.
const maxPropOps = 160

// decodeProp turns bytes into a configuration and a sequence of steps.
// Besides new objects drawn from the pools, a step may edit one field of
// an object decoded before (an endpoint turning ready or terminating, a
// ClusterIP or a port that changes, a slice moving to another Service):
// the small changes of a rollout, which leave most of a Service's names as
// they were and only some answers made from them stale.
func decodeProp(b []byte) (propConfig, []propOp) {
	r := &propBytes{b: b}
	c0, c1 := r.next(), r.next()
	c := propConfig{pods: store.PodMode(c0 % 3), ignoreEmpty: c0&4 != 0, podNames: c0&8 != 0, noEndpoints: c0&0x70 == 0x70,
		onlyNS: c0&0x80 != 0 && c0&0x10 != 0, lb: c1&1 == 0, smallCache: c1&2 != 0, reverse: c1&4 == 0, rewrites: c1&8 == 0,
		amp: c1&16 != 0, static: c1&32 != 0}
	if c1&64 != 0 {
		// Fewer than the pools' addresses: the runs of a Service's
		// endpoints get cut.
		c.udpLimit = 2
	}
	var ops []propOp
	var hist []metav1.Object // the last object decoded under each key, in order of first use
	set := func(obj metav1.Object) {
		ops = append(ops, propOp{kind: opSet, obj: obj})
		for i, h := range hist {
			if objectKey(h) == objectKey(obj) {
				hist[i] = obj
				return
			}
		}
		hist = append(hist, obj)
	}
	for !r.done() && len(ops) < maxPropOps {
		switch k := r.intn(40); {
		case k < 4:
			set(decodeService(r))
		case k < 5:
			ops = append(ops, propOp{kind: opDelete, obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.pick(propNS), Name: r.pick(propSvc)}}})
		case k < 9:
			set(decodeSlice(r))
		case k < 11:
			ops = append(ops, propOp{kind: opDelete, obj: &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: r.pick(propNS), Name: r.pick(propSlices)}}})
		case k < 12:
			set(decodePod(r))
		case k < 13:
			ops = append(ops, propOp{kind: opDelete, obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.pick(propNS), Name: r.pick(propPods)}}})
		case k < 14:
			set(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.pick(propNSObj)}})
		case k < 15:
			ops = append(ops, propOp{kind: opDelete, obj: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.pick(propNSObj)}}})
		case k < 23:
			// Mostly an EndpointSlice: endpoints are what churns.
			kind := map[int]string{0: "*v1.Service", 1: "*v1.Pod"}[r.intn(5)]
			if kind == "" {
				kind = "*v1.EndpointSlice"
			}
			var of []metav1.Object
			for _, h := range hist {
				if strings.HasPrefix(objectKey(h), kind+"/") {
					of = append(of, h)
				}
			}
			if len(of) > 0 {
				set(editObject(r, of[r.intn(len(of))]))
			}
		case k < 24:
			ops = append(ops, propOp{kind: opReapply, q: r.next()})
		case k < 28:
			ops = append(ops, propOp{kind: opPublish})
		case k < 34:
			f := r.next()
			ops = append(ops, propOp{kind: opQuery, q: r.next()<<8 | r.next(), upper: f&1 != 0, edns: f&2 != 0, tcp: f&12 == 12, wire: f&16 != 0})
		case k < 38:
			ops = append(ops, propOp{kind: opSweep, q: r.next()})
		default:
			ops = append(ops, propOp{kind: opCheck, q: r.next()})
		}
	}
	return c, ops
}

// editObject returns a copy of obj with one field changed.
func editObject(r *propBytes, obj metav1.Object) metav1.Object {
	switch v := obj.(type) {
	case *corev1.Service:
		s := v.DeepCopy()
		switch r.intn(5) {
		case 0:
			if s.Spec.Type == corev1.ServiceTypeClusterIP && s.Spec.ClusterIP != corev1.ClusterIPNone {
				s.Spec.ClusterIPs = []string{r.pick(propV4)}
				s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
			}
		case 1:
			s.Spec.PublishNotReadyAddresses = !s.Spec.PublishNotReadyAddresses
		case 2:
			if len(s.Spec.Ports) > 0 {
				s.Spec.Ports = s.Spec.Ports[1:]
			} else {
				s.Spec.Ports = []corev1.ServicePort{propSvcPorts[r.intn(len(propSvcPorts))]}
			}
		case 3:
			if s.Spec.Type == corev1.ServiceTypeExternalName {
				s.Spec.ExternalName = r.pick(propTargets)
			}
		default:
			if len(s.Spec.Ports) > 0 {
				s.Spec.Ports[0].Port++
			}
		}
		return s
	case *discoveryv1.EndpointSlice:
		s := v.DeepCopy()
		if len(s.Endpoints) == 0 || r.oneIn(5) {
			pool := propV4
			if s.AddressType == discoveryv1.AddressTypeIPv6 {
				pool = propV6
			}
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{r.pick(pool)}, Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)}})
			return s
		}
		e := &s.Endpoints[r.intn(len(s.Endpoints))]
		switch r.intn(7) {
		case 0:
			e.Conditions = discoveryv1.EndpointConditions{Ready: ptrTo(true)}
		case 1:
			e.Conditions = discoveryv1.EndpointConditions{Ready: ptrTo(false), Serving: ptrTo(true), Terminating: ptrTo(true)}
		case 2:
			e.Conditions = discoveryv1.EndpointConditions{Ready: ptrTo(false)}
		case 3:
			if h := r.pick(propHosts); h != "" {
				e.Hostname = ptrTo(h)
			} else {
				e.Hostname = nil
			}
		case 4, 5:
			// A pod of a StatefulSet restarted: same hostname, new address.
			pool := propV4
			if s.AddressType == discoveryv1.AddressTypeIPv6 {
				pool = propV6
			}
			e.Addresses = []string{r.pick(pool)}
		default:
			s.Labels = map[string]string{discoveryv1.LabelServiceName: r.pick(propSvc)}
		}
		return s
	case *corev1.Pod:
		p := v.DeepCopy()
		if r.oneIn(2) {
			p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}[r.intn(3)]
		} else {
			p.Status.PodIPs = []corev1.PodIP{{IP: r.pick(propV4)}}
			p.Status.PodIP = p.Status.PodIPs[0].IP
		}
		return p
	}
	return obj
}

func decodeService(r *propBytes) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.pick(propNS), Name: r.pick(propSvc)}}
	switch r.intn(5) {
	case 0, 1:
		s.Spec.Type = corev1.ServiceTypeClusterIP
		switch r.intn(5) {
		case 0, 1:
			s.Spec.ClusterIPs = []string{r.pick(propV4)}
		case 2:
			s.Spec.ClusterIPs = []string{r.pick(propV4), r.pick(propV6)}
		case 3:
			s.Spec.ClusterIPs = []string{r.pick(propV6)}
		default:
			s.Spec.ClusterIPs = []string{r.pick(propV6), "10.0.0.300"} // refused by the converter: the feed deletes it
		}
		if len(s.Spec.ClusterIPs) > 0 {
			s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
		}
	case 2, 3:
		s.Spec.Type, s.Spec.ClusterIP = corev1.ServiceTypeClusterIP, corev1.ClusterIPNone
	default:
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, r.pick(propTargets)
	}
	keep := r.next()
	for i, p := range propSvcPorts {
		if keep&(1<<i) != 0 {
			s.Spec.Ports = append(s.Spec.Ports, p)
		}
	}
	if keep&0x10 != 0 && keep&0x20 != 0 {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "Bad_Port", Protocol: corev1.ProtocolTCP, Port: 9})
	}
	s.Spec.PublishNotReadyAddresses = keep&0xc0 == 0xc0
	return s
}

func decodeSlice(r *propBytes) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: r.pick(propNS), Name: r.pick(propSlices)}}
	if svc := r.intn(len(propSvc) + 1); svc < len(propSvc) {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: propSvc[svc]}
	}
	pool := propV4
	switch r.intn(7) {
	case 0, 1:
		s.AddressType, pool = discoveryv1.AddressTypeIPv6, propV6
	case 2:
		s.AddressType = discoveryv1.AddressTypeFQDN
	default:
		s.AddressType = discoveryv1.AddressTypeIPv4
	}
	keep := r.next()
	for i, p := range propSvcPorts {
		if keep&(1<<i) != 0 {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptrTo(p.Name), Protocol: ptrTo(p.Protocol), Port: ptrTo(p.Port)})
		}
	}
	for range r.intn(4) {
		e := discoveryv1.Endpoint{Addresses: []string{r.pick(pool)}}
		if r.oneIn(4) {
			e.Addresses = append(e.Addresses, r.pick(pool))
		}
		if h := r.pick(propHosts); h != "" {
			e.Hostname = ptrTo(h)
		}
		switch r.intn(5) {
		case 0:
			// No conditions: ready.
		case 1, 2:
			e.Conditions.Ready = ptrTo(true)
		case 3:
			e.Conditions.Ready = ptrTo(false)
		default:
			// Terminating: not ready, still serving.
			e.Conditions = discoveryv1.EndpointConditions{Ready: ptrTo(false), Serving: ptrTo(true), Terminating: ptrTo(true)}
		}
		if p := r.intn(4); p > 0 {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("pod-%d", p)}
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func decodePod(r *propBytes) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.pick(propNS), Name: r.pick(propPods)}}
	p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}[r.intn(5)]
	if r.intn(4) != 0 {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: r.pick(propV4)})
	}
	if r.oneIn(2) {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: r.pick(propV6)})
	}
	if len(p.Status.PodIPs) > 0 {
		p.Status.PodIP = p.Status.PodIPs[0].IP
	}
	return p
}

// propWorld is the API objects the feed has seen, by kind/namespace/name.
type propWorld map[string]metav1.Object

func objectKey(obj metav1.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// follows reports whether the feed of c follows obj's kind (cmd runs the
// pod reflector for verified pods only; NoEndpoints drops EndpointSlices).
func (c propConfig) follows(obj metav1.Object) bool {
	switch obj.(type) {
	case *corev1.Pod:
		return c.pods == store.PodsVerified
	case *discoveryv1.EndpointSlice:
		return !c.noEndpoints
	}
	return true
}

// feedSet applies obj to st as the feed's sink does on a watch event: the
// converted record, or a delete when the converter refuses or drops it.
func feedSet(st *store.Store, obj metav1.Object) {
	ns, name := obj.GetNamespace(), obj.GetName()
	switch v := obj.(type) {
	case *corev1.Service:
		if rec, err := feed.ToService(v); err == nil {
			st.SetService(rec)
		} else {
			st.DeleteService(ns, name)
		}
	case *discoveryv1.EndpointSlice:
		if rec, err := feed.ToEndpointSlice(v); err == nil {
			st.SetEndpointSlice(rec)
		} else {
			st.DeleteEndpointSlice(ns, name)
		}
	case *corev1.Pod:
		if rec, ok, err := feed.ToPod(v); err == nil && ok {
			st.SetPod(rec)
		} else {
			st.DeletePod(ns, name)
		}
	case *corev1.Namespace:
		st.SetNamespace(store.Namespace{Name: name})
	}
}

func feedDelete(st *store.Store, obj metav1.Object) {
	ns, name := obj.GetNamespace(), obj.GetName()
	switch obj.(type) {
	case *corev1.Service:
		st.DeleteService(ns, name)
	case *discoveryv1.EndpointSlice:
		st.DeleteEndpointSlice(ns, name)
	case *corev1.Pod:
		st.DeletePod(ns, name)
	case *corev1.Namespace:
		st.DeleteNamespace(name)
	}
}

// objects converts the world as a fresh feed's first list would.
func (w propWorld) objects() store.Objects {
	var o store.Objects
	for _, k := range slices.Sorted(mapsKeys(w)) {
		switch v := w[k].(type) {
		case *corev1.Service:
			if rec, err := feed.ToService(v); err == nil {
				o.Services = append(o.Services, rec)
			}
		case *discoveryv1.EndpointSlice:
			if rec, err := feed.ToEndpointSlice(v); err == nil {
				o.EndpointSlices = append(o.EndpointSlices, rec)
			}
		case *corev1.Pod:
			if rec, ok, err := feed.ToPod(v); err == nil && ok {
				o.Pods = append(o.Pods, rec)
			}
		case *corev1.Namespace:
			o.Namespaces = append(o.Namespaces, store.Namespace{Name: v.Name})
		}
	}
	return o
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// touchKeys are the keys of the questions whose answers obj can change.
func touchKeys(obj metav1.Object) []string {
	ns := obj.GetNamespace()
	keys := []string{"ns/" + ns}
	var ips []string
	switch v := obj.(type) {
	case *corev1.Service:
		keys = append(keys, "svc/"+ns+"/"+v.Name)
		ips = v.Spec.ClusterIPs
	case *discoveryv1.EndpointSlice:
		if svc := v.Labels[discoveryv1.LabelServiceName]; svc != "" {
			keys = append(keys, "svc/"+ns+"/"+svc)
		}
		for _, e := range v.Endpoints {
			ips = append(ips, e.Addresses...)
		}
	case *corev1.Pod:
		for _, ip := range v.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
	case *corev1.Namespace:
		keys = append(keys, "ns/"+v.Name)
	}
	for _, ip := range ips {
		keys = append(keys, "ip/"+ip, "ip")
	}
	return keys
}

// propWantKey is a question to the fresh handler: its replies are kept
// until the next publish.
type propWantKey struct {
	q         dns.Question
	edns, tcp bool
}

// propRun runs one sequence: the handler under test keeps its reply cache
// throughout; each comparison is with a handler over a store built fresh
// from the objects last published.
type propRun struct {
	tb      testing.TB
	cfg     propConfig
	st      *store.Store
	h       *Handler
	cur     propWorld // what the feed has applied
	pub     propWorld // what the last publish covered
	fresh   *Handler  // over pub; nil until needed
	wants   map[propWantKey]*dns.Msg
	asked   map[int]propOp
	keys    map[string]bool // touched since the start
	changed map[string]bool // touched since the last publish
	note    string          // what the current step resolved to
}

// runProp returns the first difference between the handler under test and
// a fresh build ("" when there is none).
func runProp(tb testing.TB, cfg propConfig, ops []propOp) string {
	return runPropNotes(tb, cfg, ops, nil)
}

// runPropNotes is runProp that appends to notes, per step, what the step
// resolved to (the key of a sweep).
func runPropNotes(tb testing.TB, cfg propConfig, ops []propOp, notes *[]string) string {
	st, err := store.New(cfg.storeOptions())
	if err != nil {
		tb.Fatal(err)
	}
	st.Publish() // the first sync, of an empty cluster
	r := &propRun{tb: tb, cfg: cfg, st: st, h: cfg.handler(tb, st), cur: propWorld{}, pub: propWorld{},
		asked: map[int]propOp{}, keys: map[string]bool{}, changed: map[string]bool{}}
	for i, op := range ops {
		if msg := r.apply(op); msg != "" {
			return fmt.Sprintf("step %d (%s): %s", i, op, msg)
		}
		if notes != nil {
			*notes = append(*notes, r.note)
		}
		r.note = ""
	}
	if msg := r.publish(); msg != "" {
		return "at the end: " + msg
	}
	return r.final()
}

func (r *propRun) apply(op propOp) string {
	switch op.kind {
	case opSet:
		r.touch(op.obj)
		if old, ok := r.cur[objectKey(op.obj)]; ok {
			r.touch(old)
		}
		r.cur[objectKey(op.obj)] = op.obj
		if r.cfg.follows(op.obj) {
			feedSet(r.st, op.obj)
		}
	case opDelete:
		key := objectKey(op.obj)
		old, ok := r.cur[key]
		if !ok {
			return "" // a watch never deletes what it has not added
		}
		r.touch(old)
		delete(r.cur, key)
		if r.cfg.follows(old) {
			feedDelete(r.st, old)
		}
	case opReapply:
		if len(r.cur) == 0 {
			return ""
		}
		keys := slices.Sorted(mapsKeys(r.cur))
		if obj := r.cur[keys[op.q%len(keys)]]; r.cfg.follows(obj) {
			feedSet(r.st, obj)
		}
	case opPublish:
		return r.publish()
	case opQuery:
		qi := op.q % len(propQuestions)
		r.asked[qi<<3|flagBits(op)] = op
		return r.compare(propQuestions[qi].q, op, 1)
	case opSweep:
		key := propKeys[op.q%len(propKeys)]
		if touched := slices.DeleteFunc(slices.Clone(propKeys), func(k string) bool { return !r.keys[k] }); len(touched) > 0 && op.q%4 != 0 {
			// Mostly a Service or address the sequence has touched.
			key = touched[op.q/4%len(touched)]
		}
		r.note = key
		for i, pq := range propQuestions {
			if !slices.Contains(pq.keys, key) || !slices.Contains(sweepTypes, pq.q.Qtype) {
				continue
			}
			o := propOp{q: i, edns: (i+op.q)%3 == 0, wire: true}
			r.asked[i<<3|flagBits(o)] = o
			if msg := r.compare(pq.q, o, 1); msg != "" {
				return msg
			}
		}
	case opCheck:
		rnd := rand.New(rand.NewPCG(uint64(op.q), 0))
		for range 24 {
			o := propOp{q: rnd.IntN(len(propQuestions)), upper: rnd.IntN(4) == 0, edns: rnd.IntN(2) == 0, wire: rnd.IntN(2) == 0}
			if msg := r.compare(propQuestions[o.q].q, o, 2); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// touch marks the questions of obj's names as touched, and those of the
// ExternalName Services pointing at them (two hops).
func (r *propRun) touch(obj metav1.Object) {
	keys := touchKeys(obj)
	for range 2 {
		for _, o := range r.cur {
			s, ok := o.(*corev1.Service)
			if !ok || s.Spec.Type != corev1.ServiceTypeExternalName {
				continue
			}
			target := strings.ToLower(strings.TrimSuffix(s.Spec.ExternalName, "."))
			for _, k := range keys {
				ns, name, ok := strings.Cut(strings.TrimPrefix(k, "svc/"), "/")
				if ok && strings.HasPrefix(k, "svc/") && strings.HasSuffix(target, name+"."+ns+".svc.cluster.local") {
					keys = append(keys, "svc/"+s.Namespace+"/"+s.Name)
					break
				}
			}
		}
	}
	for _, k := range keys {
		r.keys[k], r.changed[k] = true, true
	}
}

func flagBits(op propOp) int {
	b := 0
	if op.upper {
		b |= 1
	}
	if op.edns {
		b |= 2
	}
	if op.tcp {
		b |= 4
	}
	return b
}

// publish publishes the store, then asks again the questions asked
// before whose objects changed since the last publish: their cached
// replies are the ones that may have gone stale.
func (r *propRun) publish() string {
	r.st.Publish()
	r.pub = make(propWorld, len(r.cur))
	for k, v := range r.cur {
		r.pub[k] = v
	}
	r.fresh = nil
	changed := r.changed
	changed["any"] = true // the apexes' serial, autopath
	r.changed = map[string]bool{}
	for _, k := range slices.Sorted(mapsKeys(r.asked)) {
		pq := propQuestions[k>>3]
		if !slices.ContainsFunc(pq.keys, func(key string) bool { return changed[key] }) {
			continue
		}
		if msg := r.compare(pq.q, r.asked[k], 1); msg != "" {
			return "after the publish: " + msg
		}
	}
	return ""
}

// final asks, twice each (the second from the cache), every question
// asked during the sequence (each may have left a reply in the cache),
// then A and SRV of every name the sequence touched and every question of
// the fixed names (the apexes, autopath), once each.
func (r *propRun) final() string {
	seen := map[int]bool{}
	for _, k := range slices.Sorted(mapsKeys(r.asked)) {
		seen[k] = true
		op := r.asked[k]
		op.wire = true
		if msg := r.compare(propQuestions[k>>3].q, op, 2); msg != "" {
			return "final check: " + msg
		}
	}
	for i, pq := range propQuestions {
		touched := slices.Contains(pq.keys, "any")
		for _, k := range pq.keys {
			touched = touched || (r.keys[k] && (pq.q.Qtype == dns.TypeA || pq.q.Qtype == dns.TypeSRV))
		}
		op := propOp{q: i, edns: i%2 == 0, upper: i%5 == 0, wire: true}
		if !touched || seen[i<<3|flagBits(op)] {
			continue
		}
		if msg := r.compare(pq.q, op, 1); msg != "" {
			return "final check: " + msg
		}
	}
	return ""
}

// compare asks q of the handler under test tries times and of a fresh
// handler once, and returns how the replies differ.
func (r *propRun) compare(q dns.Question, op propOp, tries int) string {
	if op.upper {
		q.Name = strings.ToUpper(q.Name)
	}
	if r.fresh == nil {
		st, err := store.New(r.cfg.storeOptions())
		if err != nil {
			r.tb.Fatal(err)
		}
		o := r.pub.objects()
		if r.cfg.pods != store.PodsVerified {
			o.Pods = nil
		}
		if r.cfg.noEndpoints {
			o.EndpointSlices = nil
		}
		st.Replace(o)
		st.Publish()
		r.fresh = r.cfg.handler(r.tb, st)
		r.wants = map[propWantKey]*dns.Msg{}
	}
	wk := propWantKey{q, op.edns, op.tcp}
	want := r.wants[wk]
	if want == nil {
		want = propAsk(r.tb, r.fresh, q, op.edns, op.tcp, false)
		r.wants[wk] = want
	}
	var full *dns.Msg
	if (r.cfg.lb && want.Truncated) || (r.cfg.udpLimit > 0 && !op.tcp) {
		// Rotated before it was truncated, or cut to the UDP answer
		// limit: which records are in depends on how often the reply
		// was served. They must be records of the whole answer.
		full = propAsk(r.tb, r.fresh, q, op.edns, true, false)
	}
	for try := range tries {
		if got := propAsk(r.tb, r.h, q, op.edns, op.tcp, op.wire); !sameReply(got, want, r.cfg.lb) && !sameTruncated(got, want, full) {
			return fmt.Sprintf("%s %s (edns=%v tcp=%v wire=%v, ask %d):\n--- got (reply cache under churn)\n%s\n--- want (fresh build)\n%s",
				q.Name, dns.TypeToString[q.Qtype], op.edns, op.tcp, op.wire, try+1, got, want)
		}
	}
	return ""
}

// propAsk returns h's reply to q with id 0 and SOA serials 0 (a fresh
// store has its own) when they are right: an answer's the current one. With wire the query goes to AnswerWire first, as the
// UDP listener does, then to ServeDNS on a miss.
func propAsk(tb testing.TB, h *Handler, q dns.Question, edns, tcp, wire bool) *dns.Msg {
	tb.Helper()
	req := new(dns.Msg)
	req.Question = []dns.Question{q}
	req.RecursionDesired = true
	if edns {
		req.SetEdns0(1232, false)
	}
	var m *dns.Msg
	if wire && !tcp {
		b, err := req.Pack()
		if err != nil {
			tb.Fatal(err)
		}
		if out, ok := h.AnswerWire(nil, b); ok {
			m = new(dns.Msg)
			if err := m.Unpack(out); err != nil {
				tb.Fatalf("%s: unpack the AnswerWire reply: %v", q.Name, err)
			}
		}
	}
	if m == nil {
		w := &fakeWriter{tcp: tcp}
		h.ServeDNS(w, req)
		if w.err != nil || w.msg == nil {
			tb.Fatalf("%s %s: no reply (%v)", q.Name, dns.TypeToString[q.Qtype], w.err)
		}
		m = w.msg
	}
	m.Id = 0
	serial := h.records.Snapshot().Serial
	for i, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			// An apex's SOA answer carries the current serial; a negative
			// answer's SOA the serial it was made with.
			if soa, ok := rr.(*dns.SOA); ok && (i > 0 || soa.Serial == serial) {
				soa.Serial = 0
			}
		}
	}
	return m
}

// sameReply reports whether two replies are equal: the header, the
// question, and each section record for record, TTLs and owner case
// included; with loadbalance (lb) in any order, since the rotation
// depends on how often a reply was served.
func sameReply(a, b *dns.Msg, lb bool) bool {
	if a.MsgHdr != b.MsgHdr || !slices.Equal(a.Question, b.Question) {
		return false
	}
	for _, p := range [][2][]dns.RR{{a.Answer, b.Answer}, {a.Ns, b.Ns}, {a.Extra, b.Extra}} {
		x, y := p[0], p[1]
		if len(x) != len(y) {
			return false
		}
		used := make([]bool, len(y))
		for i, rr := range x {
			found := false
			for j, other := range y {
				if !used[j] && (lb || i == j) && sameRR(rr, other) {
					used[j], found = true, true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// sameTruncated reports whether got, a reply truncated after its records
// were rotated, has want's header and counts and only records of full,
// the whole reply (nil: none).
func sameTruncated(got, want, full *dns.Msg) bool {
	if full == nil || got.MsgHdr != want.MsgHdr || !slices.Equal(got.Question, want.Question) ||
		len(got.Answer) != len(want.Answer) || len(got.Ns) != len(want.Ns) || len(got.Extra) != len(want.Extra) {
		return false
	}
	for _, p := range [][2][]dns.RR{{got.Answer, full.Answer}, {got.Ns, full.Ns}, {got.Extra, full.Extra}} {
		for _, rr := range p[0] {
			if !slices.ContainsFunc(p[1], func(o dns.RR) bool { return sameRR(rr, o) }) {
				return false
			}
		}
	}
	return true
}

func sameRR(a, b dns.RR) bool {
	if *a.Header() != *b.Header() {
		return false
	}
	if oa, ok := a.(*dns.OPT); ok {
		ob, ok := b.(*dns.OPT)
		return ok && len(oa.Option) == len(ob.Option) && a.String() == b.String()
	}
	return dns.IsDuplicate(a, b)
}

// shrinkProp drops steps while the sequence still fails, larger chunks
// first (delta debugging), within a budget of runs.
func shrinkProp(tb testing.TB, cfg propConfig, ops []propOp) ([]propOp, string) {
	msg := runProp(tb, cfg, ops)
	budget := 3000
	for chunk := len(ops) / 2; chunk >= 1 && budget > 0; {
		removed := false
		for start := 0; start+chunk <= len(ops) && budget > 0; {
			try := append(slices.Clone(ops[:start]), ops[start+chunk:]...)
			budget--
			if m := runProp(tb, cfg, try); m != "" {
				ops, msg, removed = try, m, true
				continue
			}
			start += chunk
		}
		if !removed {
			chunk /= 2
		}
	}
	return ops, msg
}

// checkProp runs the sequence of b and fails with the minimal failing
// sequence; what names the input in the message.
func checkProp(t *testing.T, what string, b []byte) {
	cfg, ops := decodeProp(b)
	if msg := runProp(t, cfg, ops); msg == "" {
		return
	}
	min, msg := shrinkProp(t, cfg, ops)
	var notes []string
	runPropNotes(t, cfg, min, &notes)
	var sb strings.Builder
	for i, op := range min {
		fmt.Fprintf(&sb, "  %d. %s", i, op)
		if i < len(notes) && notes[i] != "" {
			fmt.Fprintf(&sb, " (%s)", notes[i])
		}
		sb.WriteByte('\n')
	}
	t.Fatalf("%s: the reply cache differs from a fresh build\nconfig: %s\nminimal sequence (%d of %d steps, then publish and the final check):\n%s%s",
		what, cfg, len(min), len(ops), sb.String(), msg)
}

// propSequences and propSequenceBytes size the seeded run of go test.
const (
	propSequences     = 150
	propSequenceBytes = 600
)

func propInput(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestReplyCacheProperty replays a fixed number of seeded sequences (a few
// seconds), so the property runs in every go test; FuzzReplyCacheChurn
// explores further.
func TestReplyCacheProperty(t *testing.T) {
	n := propSequences
	if testing.Short() {
		n /= 5
	}
	for seed := range uint64(n) {
		checkProp(t, fmt.Sprintf("seed %d", seed), propInput(seed, propSequenceBytes))
	}
}

// FuzzReplyCacheChurn is the property over arbitrary sequences. A failing
// input is kept under testdata/fuzz/FuzzReplyCacheChurn.
func FuzzReplyCacheChurn(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(propInput(seed, propSequenceBytes))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkProp(t, "input", b)
	})
}
