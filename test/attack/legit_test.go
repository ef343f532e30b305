package attack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// The legitimate clients, and what they count as lost.
const (
	legitTimeout = 5 * time.Second // glibc's wait before it asks again
	maxLostPct   = 1
)

// class counts the outcomes of one kind of legitimate client.
type class struct {
	name string

	mu       sync.Mutex
	sent     int
	lost     int
	outcomes map[string]int
}

// add counts one exchange: lost unless ok.
func (c *class) add(outcome string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outcomes == nil {
		c.outcomes = map[string]int{}
	}
	c.sent++
	c.outcomes[outcome]++
	if !ok {
		c.lost++
	}
}

// violated says how the class broke the invariant, or "".
func (c *class) violated() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.sent == 0:
		return fmt.Sprintf("%s: none sent", c.name)
	case 100*c.lost > maxLostPct*c.sent:
		return fmt.Sprintf("%s: %d/%d lost (%.1f %%)", c.name, c.lost, c.sent, 100*float64(c.lost)/float64(c.sent))
	}
	return ""
}

func (c *class) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for o, n := range c.outcomes {
		parts = append(parts, fmt.Sprintf("%s %d", o, n))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s: %d/%d lost (%s)", c.name, c.lost, c.sent, strings.Join(parts, ", "))
}

// dnsOutcome counts a DNS exchange: ok only with NOERROR and an answer.
func (c *class) dnsOutcome(r *dns.Msg, err error) {
	switch {
	case err != nil:
		c.add(errKind(err), false)
	case r.Rcode != dns.RcodeSuccess:
		c.add(dns.RcodeToString[r.Rcode], false)
	case len(r.Answer) == 0:
		c.add("no answer", false)
	default:
		c.add("ok", true)
	}
}

// errKind names a failed exchange: timeout, closed, refused or error.
func errKind(err error) string {
	var ne net.Error
	switch s := err.Error(); {
	case strings.Contains(s, "refused"):
		return "refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case strings.Contains(s, "reset"), strings.Contains(s, "EOF"), strings.Contains(s, "broken pipe"):
		return "closed"
	}
	return "error"
}

// legit is the legitimate classes of a scenario.
type legit struct {
	nlCluster, nlExternal, tcpCluster, tcpNodeLocal, reviews class
}

func (l *legit) classes() []*class {
	return []*class{&l.nlCluster, &l.nlExternal, &l.tcpCluster, &l.tcpNodeLocal, &l.reviews}
}

// runLegit asks as legitimate clients for window and returns when every
// exchange has ended: cluster names through node-local over UDP (20 qps,
// plainly and by autopath, each after its TTL), external names through
// node-local (20 qps, each new, each its own registrable domain), fresh
// TCP clients of the cluster DNS and of node-local (5 a second each), and
// admission reviews (5 a second).
func runLegit(e *env, window time.Duration) *legit {
	l := &legit{nlCluster: class{name: "cluster names through node-local"}, nlExternal: class{name: "external names through node-local"},
		tcpCluster: class{name: "fresh TCP clients of the cluster DNS"}, tcpNodeLocal: class{name: "fresh TCP clients of node-local"},
		reviews: class{name: "admission reviews"}}
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var wg sync.WaitGroup
	ask := func(qps int, network, src, server string, name func(i int) string, c *class) {
		wg.Go(func() {
			client := &dns.Client{Net: network, Timeout: legitTimeout}
			if network == "tcp" {
				client.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: legitTimeout}
			} else {
				client.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}, Timeout: legitTimeout}
			}
			i := 0
			testkit.Every(ctx, time.Second/time.Duration(qps), func() bool {
				m := new(dns.Msg).SetQuestion(name(i), dns.TypeA)
				i++
				wg.Go(func() {
					r, _, err := client.Exchange(m, server)
					c.dnsOutcome(r, err)
				})
				return true
			})
		})
	}
	ask(20, "udp", legitPod, e.nodeLocal.DNS, ordinary, &l.nlCluster)
	ask(20, "udp", legitPod, e.nodeLocal.DNS, func(i int) string { return fmt.Sprintf("www.site%d.org.", i) }, &l.nlExternal)
	ask(5, "tcp", legitTCP, e.cluster.DNS, func(i int) string { return fmt.Sprintf("svc-%d.prod.svc.cluster.local.", i%services) }, &l.tcpCluster)
	ask(5, "tcp", legitTCP, e.nodeLocal.DNS, func(i int) string { return fmt.Sprintf("svc-%d.prod.svc.cluster.local.", (i+200)%services) }, &l.tcpNodeLocal)
	wg.Go(func() { reviews(ctx, &wg, e, &l.reviews) })
	<-ctx.Done()
	wg.Wait()
	return l
}

// ordinary is the i-th cluster name through node-local: a prod Service,
// plainly or by autopath; at 20 qps each is asked again after 20 s, past
// its TTL, so node-local asks the cluster DNS.
func ordinary(i int) string {
	k := i % services
	if i%2 == 0 {
		return fmt.Sprintf("svc-%d.prod.svc.cluster.local.", k)
	}
	return fmt.Sprintf("svc-%d.search.prod.cluster.local.ap.k8s.io.", k)
}

// reviews posts 5 admission reviews a second as the API server: lost
// unless 200 with an allowed answer for its uid.
func reviews(ctx context.Context, wg *sync.WaitGroup, e *env, c *class) {
	client := sourceClient(e, legitAPI)
	defer client.CloseIdleConnections()
	i := 0
	testkit.Every(ctx, 200*time.Millisecond, func() bool {
		uid := fmt.Sprintf("legit-%d", i)
		body := legitReview(uid, i)
		i++
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			code, answer, err := postRead(rctx, client, e.webhook.url, body)
			switch {
			case err != nil:
				c.add(errKind(err), false)
			case code != http.StatusOK:
				c.add(fmt.Sprint(code), false)
			default:
				var out struct {
					Response *struct {
						UID     string
						Allowed bool
					}
				}
				if json.Unmarshal(answer, &out) != nil || out.Response == nil || out.Response.UID != uid || !out.Response.Allowed {
					c.add("wrong answer", false)
				} else {
					c.add("allowed", true)
				}
			}
		})
		return true
	})
}

// legitReview is a Pod CREATE the webhook allows.
func legitReview(uid string, i int) []byte {
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-%d","namespace":"prod"},"spec":{"hostname":"web","subdomain":"svc",`+
		`"dnsConfig":{"options":[{"name":"ndots","value":"2"}]},"containers":[{"name":"app","image":"registry.example/app:1.0"}]}}`, i)
	return fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":%q,`+
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},`+
		`"name":"web-%d","namespace":"prod","operation":"CREATE","object":%s}}`, uid, i, pod)
}
