package nodelocal

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// Routes are the names the stage sends to the cluster DNS: zones (with
// their subdomains) and single names, as lowercase FQDNs. When a rule of
// the cluster DNS cannot be bounded to zones, every name goes there
// (Unbounded). A Routes is immutable.
type Routes struct {
	names     map[string]bool // true: the zone and its subdomains; false: the name alone
	unbounded []string
}

// Cluster reports whether name goes to the cluster DNS. It is one map
// lookup per label, case-insensitive, without allocating; an escaped dot
// is inside its label ("x\\.cluster.local." is under "local.").
func (r *Routes) Cluster(name string) bool {
	if len(r.unbounded) > 0 {
		return true
	}
	var buf [256]byte
	if name == "" || len(name) > len(buf)-1 {
		return false
	}
	n := copy(buf[:], name)
	for i := range n {
		if c := buf[i]; 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	if buf[n-1] != '.' {
		buf[n] = '.'
		n++
	}
	b := buf[:n]
	if _, ok := r.names[string(b)]; ok {
		return true
	}
	for i := 0; i < n-1; i++ {
		if b[i] == '.' && !escaped(b, i) {
			if zone := r.names[string(b[i+1:])]; zone {
				return true
			}
		}
	}
	return false
}

// escaped reports whether b[i] is escaped: an odd number of backslashes
// before it ("a\.b" is one label, "a\\.b" two).
func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// Len is the number of zones and names.
func (r *Routes) Len() int { return len(r.names) }

// Unbounded are the reasons every name goes to the cluster DNS (a rewrite
// matching by prefix, substring or regex; a hosts file the stage cannot
// read); none when the routes are bounded.
func (r *Routes) Unbounded() []string { return r.unbounded }

// NewRoutes computes the routes of the cluster zone clusterDomain and of
// cl, the cluster DNS's validated configuration (nil: none): the cluster
// zone, ap.k8s.io and the reverse zones; then cl's cluster zone, its
// clusterset zone, the zone of every forward route but ".", the names "." excepts, every override
// name, every name of hosts (the cluster DNS's hosts file, read by the
// caller; hostsErr when it could not be read), and the names rewrites
// match: an exact rule's name, a suffix rule's zone, and for prefix,
// substring and regex rules every name.
func NewRoutes(clusterDomain string, cl *v1alpha1.ServerConfiguration, hosts iter.Seq[string], hostsErr error) *Routes {
	r := &Routes{names: map[string]bool{}}
	zone := func(z string) { r.names[lowerFQDN(z)] = true }
	name := func(n string) {
		if n = lowerFQDN(n); !r.names[n] {
			r.names[n] = false
		}
	}
	zone(clusterDomain)
	for _, z := range dnsserver.ClusterZones {
		zone(z)
	}
	if cl == nil {
		return r
	}
	zone(cl.ClusterZone())
	if z := cl.ClustersetZoneName(); z != "" {
		zone(z) // the Multi-Cluster Services zone the cluster DNS answers
	}
	for i := range cl.Forward {
		f := &cl.Forward[i]
		if z := f.ZoneName(); z != "." {
			zone(z)
			continue
		}
		// Names "." excepts are the cluster DNS's own answer (no route
		// takes them).
		for _, x := range f.ExceptNames() {
			zone(x)
		}
	}
	for i := range cl.Overrides {
		name(cl.Overrides[i].NameFQDN())
	}
	if cl.Hosts.File != "" {
		if hostsErr != nil {
			r.unbounded = append(r.unbounded, fmt.Sprintf("hosts.file %q: %v", cl.Hosts.File, hostsErr))
		} else if hosts != nil {
			for n := range hosts {
				name(n)
			}
		}
	}
	for i := range cl.Rewrites {
		rw := &cl.Rewrites[i]
		from := rw.FromValue()
		switch rw.Match {
		case "", v1alpha1.RewriteExact:
			name(from)
		case v1alpha1.RewriteSuffix:
			// A suffix may start inside a label ("example.com." matches
			// "myexample.com."): the zone is then its parent.
			if z, ok := strings.CutPrefix(from, "."); ok && z != "" {
				zone(z)
			} else if _, parent, _ := strings.Cut(from, "."); parent != "" {
				zone(parent)
			} else {
				r.unbounded = append(r.unbounded, fmt.Sprintf("rewrites[%d]: suffix %q matches names in every zone", i, rw.From))
			}
		default:
			r.unbounded = append(r.unbounded, fmt.Sprintf("rewrites[%d]: match %q cannot be bounded to a zone", i, rw.Match))
		}
	}
	return r
}

func lowerFQDN(s string) string { return strings.ToLower(dns.Fqdn(s)) }

// router sends the queries of the routes to the cluster DNS, and the
// others to external; with external nil, every query goes to the cluster
// DNS (nodeLocal.external "cluster").
type router struct {
	cluster, external Exchanger
	routes            atomic.Pointer[Routes]
	m                 *routeMetrics
}

var _ Exchanger = (*router)(nil)

func (r *router) pick(m *dns.Msg) (Exchanger, bool) {
	if len(m.Question) != 1 {
		return nil, false
	}
	if r.external == nil || r.routes.Load().Cluster(m.Question[0].Name) {
		return r.cluster, true
	}
	return r.external, false
}

// Exchange is Forward for the zero Origin.
func (r *router) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	return r.Forward(ctx, m, dnsmsg.Origin{})
}

// Forward sends m, asked by o, to its question's upstream.
func (r *router) Forward(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (*dns.Msg, error) {
	up, cluster := r.pick(m)
	if up == nil {
		return nil, forward.ErrNoUpstream
	}
	if cluster {
		r.m.toCluster.Inc()
	} else {
		r.m.toDirect.Inc()
	}
	return forward.Ask(ctx, up, m, o)
}

// CheckLoop is the CheckLoop of m's upstream, when it has one.
func (r *router) CheckLoop(m *dns.Msg) error {
	up, _ := r.pick(m)
	if lc, ok := up.(interface{ CheckLoop(*dns.Msg) error }); ok {
		return lc.CheckLoop(m)
	}
	return nil
}
