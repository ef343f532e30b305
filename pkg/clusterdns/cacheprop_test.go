package clusterdns

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
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
		a, err := nsmetrics.New(10, "cluster.local", st)
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
