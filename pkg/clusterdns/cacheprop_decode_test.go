package clusterdns

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// How the reply cache property's sequences are decoded from bytes: the
// steps, and the Services, EndpointSlices and Pods they change.

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
