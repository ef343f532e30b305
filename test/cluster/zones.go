package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LabelZones sets each named node's topology zone label
// (topology.kubernetes.io/zone), as a cloud provider's node controller
// does. Set it before the node-local stage starts: it reads its node's
// zone then.
func (c *Cluster) LabelZones(ctx context.Context, zones map[string]string) error {
	for node, zone := range zones {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelTopologyZone, zone)
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s with zone %s: %w", node, zone, err)
		}
	}
	return nil
}

// exchangeOn sends one query from node n's network namespace to server
// over UDP, with no retry.
func (n *Node) exchangeOn(ctx context.Context, server netip.Addr, m *dns.Msg) (*dns.Msg, error) {
	var r *dns.Msg
	err := n.Harness.Do(func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		r, _, err = (&dns.Client{Net: "udp"}).ExchangeContext(ctx, m, netip.AddrPortFrom(server, 53).String())
		return err
	})
	return r, err
}

// lookupAOn asks server, from node n's network namespace, for name's A
// records and returns the addresses, sorted; an answer other than
// NOERROR is an error.
func (n *Node) lookupAOn(ctx context.Context, server netip.Addr, name string) ([]string, error) {
	r, err := n.exchangeOn(ctx, server, new(dns.Msg).SetQuestion(name, dns.TypeA))
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s at %s from %s: %s", name, server, n.Name, dns.RcodeToString[r.Rcode])
	}
	var addrs []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			addrs = append(addrs, a.A.String())
		}
	}
	return sortedSet(addrs), nil
}

// metricSeries reads every series of the metric name at url, dialled from
// node n's network namespace, by the value of its label label ("" for a
// series without it). ok is false when the metric has no series.
func (n *Node) metricSeries(ctx context.Context, url, name, label string) (series map[string]int, ok bool, err error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: n.dialContext, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	series = map[string]int{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		metric, labels, _ := strings.Cut(f[0], "{")
		if metric != name {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %s: %w", url, sc.Text(), err)
		}
		series[labelValue(labels, label)] += int(v)
		ok = true
	}
	return series, ok, sc.Err()
}

// labelValue returns the value of label in a series' label set
// (`a="x",b="y"}`), or "".
func labelValue(labels, label string) string {
	_, rest, found := strings.Cut(","+labels, ","+label+`="`)
	if !found {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// sortedSet sorts s and drops repeats.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
