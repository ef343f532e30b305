package corefile

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// kube-dns's record TTL (kube-dns --dns-ttl default) and its pod records.
const kubeDNSTTL = 30

// KubeDNS converts the data of a kube-dns ConfigMap: stubDomains (JSON,
// zone → [ip]) and upstreamNameservers (JSON, [ip]).
func KubeDNS(data map[string]string) (Result, error) {
	c := &converter{routes: map[string]int{}, entryAt: map[string]string{}}
	c.cfg.APIVersion, c.cfg.Kind = v1alpha1.GroupVersion, v1alpha1.ServerKind
	c.cfg.Listen = []string{":53"}
	c.cfg.Pods = v1alpha1.PodsInsecure
	ttl := kubeDNSTTL
	c.cfg.TTL = &ttl
	c.add("kube-dns", "kube-dns", Converted, "listen :53, pods insecure and ttl %d as kube-dns", ttl)
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	upstream := []string{"/etc/resolv.conf"}
	for _, k := range keys {
		where := "data." + k
		switch k {
		case "stubDomains":
			var stubs map[string][]string
			if err := json.Unmarshal([]byte(data[k]), &stubs); err != nil {
				return Result{}, fmt.Errorf("%s: not a JSON object of zone to addresses: %w", where, err)
			}
			zones := make([]string, 0, len(stubs))
			for z := range stubs {
				zones = append(zones, z)
			}
			sort.Strings(zones)
			for _, z := range zones {
				c.cfg.Forward = append(c.cfg.Forward, v1alpha1.ForwardRoute{Zone: z, Upstreams: stubs[z]})
				c.add(where+"."+z, "stubDomains", Converted, "forward route %s: upstreams %v", z, stubs[z])
			}
		case "upstreamNameservers":
			var ips []string
			if err := json.Unmarshal([]byte(data[k]), &ips); err != nil {
				return Result{}, fmt.Errorf("%s: not a JSON list of addresses: %w", where, err)
			}
			upstream = ips
			c.add(where, k, Converted, "forward route .: upstreams %v", ips)
		default:
			c.add(where, k, Dropped, "not a kube-dns setting dnsconfigurer knows (federations are gone since Kubernetes 1.15)")
		}
	}
	c.cfg.Forward = append([]v1alpha1.ForwardRoute{{Zone: ".", Upstreams: upstream}}, c.cfg.Forward...)
	return Result{Config: c.cfg, Findings: c.out}, check(c.cfg, func(string) string { return "data" })
}
