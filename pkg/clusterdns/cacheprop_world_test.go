package clusterdns

import (
	"fmt"
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// The reply cache property's world (the objects the feed has seen, fed to
// a store) and how replies are asked and compared.

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
		if rec, err := kubefeed.ToService(v); err == nil {
			st.SetService(rec)
		} else {
			st.DeleteService(ns, name)
		}
	case *discoveryv1.EndpointSlice:
		if rec, err := kubefeed.ToEndpointSlice(v); err == nil {
			st.SetEndpointSlice(rec)
		} else {
			st.DeleteEndpointSlice(ns, name)
		}
	case *corev1.Pod:
		if rec, ok, err := kubefeed.ToPod(v); err == nil && ok {
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
			if rec, err := kubefeed.ToService(v); err == nil {
				o.Services = append(o.Services, rec)
			}
		case *discoveryv1.EndpointSlice:
			if rec, err := kubefeed.ToEndpointSlice(v); err == nil {
				o.EndpointSlices = append(o.EndpointSlices, rec)
			}
		case *corev1.Pod:
			if rec, ok, err := kubefeed.ToPod(v); err == nil && ok {
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
