package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/feed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

func init() {
	register("demo", command{summary: "run the chain on the embedded examples: render a pod, serve the example objects, resolve through it", run: runDemo})
}

// runDemo is the newcomer's first command: no cluster, no root, loopback only.
func runDemo(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	podFile := fs.String("pod", "examples/pod.yaml", "pod manifest to render")
	resolv := fs.String("resolv-conf", "examples/node-resolv.conf", "the node's resolv.conf")
	objects := fs.String("objects", "examples/objects", "manifests the cluster DNS serves")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	pod, err := readPod(*podFile, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitUsage
	}
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitFail
	}
	host := loadHost(*resolv, "linux")
	in := podspec.Input(pod)
	for _, variant := range []struct{ title, annotation string }{
		{"as written", in.PolicyAnnotation},
		{"with dnsconfigurer.io/dns-policy: ClusterFirstWithAutopath", string(policy.ClusterFirstWithAutopath)},
	} {
		in.PolicyAnnotation = variant.annotation
		r, err := eng.Compute(in, host)
		if err != nil {
			fmt.Fprintf(stderr, "demo: render %s: %v\n", *podFile, err)
			return exitFail
		}
		fmt.Fprintf(stdout, "== resolv.conf of pod %s/%s %s (node resolv.conf %s)\n%s", pod.Namespace, pod.Name, variant.title, *resolv,
			resolvconf.Format(r.Config()))
		for _, w := range r.Warnings {
			fmt.Fprintf(stdout, "   warning %s: %s\n", w.Reason, w.Message)
		}
	}

	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5, Pods: store.PodsVerified})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitFail
	}
	objs, err := feed.LoadManifests(*objects)
	if err != nil {
		fmt.Fprintf(stderr, "demo: --objects: %v\n", err)
		return exitUsage
	}
	st.Replace(objs)
	st.Publish()
	ap, _ := dnsserver.WithAutopath(0, nil)
	cluster := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: dnsserver.NewHandler("cluster.local", st, ap)}
	if err := cluster.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitFail
	}
	defer cluster.Shutdown(context.WithoutCancel(ctx))
	fwd, _ := dnsserver.NewForwarder(dnsserver.StaticUpstreams(cluster.Addrs()), nil, 2*time.Second, nil)
	nl, _ := nodelocal.New(fwd, nodelocal.Config{ClusterDomain: "cluster.local", HostSearches: func() []string { return host.Searches }})
	local := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: nl}
	if err := local.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitFail
	}
	defer local.Shutdown(context.WithoutCancel(ctx))
	fmt.Fprintf(stdout, "\n== cluster DNS on %s serving %s (%d Services); node-local stage on %s\n", cluster.Addrs()[0], *objects, len(objs.Services), local.Addrs()[0])

	queries := []struct {
		via   string
		name  string
		qtype uint16
	}{
		{cluster.Addrs()[0], "web.prod.svc.cluster.local.", dns.TypeA},
		{cluster.Addrs()[0], "web.prod.svc.cluster.local.", dns.TypeAAAA},
		{cluster.Addrs()[0], "_http._tcp.web.prod.svc.cluster.local.", dns.TypeSRV},
		{cluster.Addrs()[0], "db.prod.svc.cluster.local.", dns.TypeA},
		{cluster.Addrs()[0], "dns-version.cluster.local.", dns.TypeTXT},
		{cluster.Addrs()[0], "10.0.96.10.in-addr.arpa.", dns.TypePTR},
		{cluster.Addrs()[0], "nosuch.prod.svc.cluster.local.", dns.TypeA},
		{local.Addrs()[0], "web.search.prod.cluster.local.ap.k8s.io.", dns.TypeA},
		{local.Addrs()[0], "kubernetes.default.search.prod.cluster.local.ap.k8s.io.", dns.TypeA},
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	for _, q := range queries {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		r, _, err := c.ExchangeContext(ctx, m, q.via)
		if err != nil {
			fmt.Fprintf(stderr, "demo: %s %s: %v\n", q.name, dns.TypeToString[q.qtype], err)
			return exitFail
		}
		via := "cluster DNS"
		if q.via == local.Addrs()[0] {
			via = "node-local"
		}
		fmt.Fprintf(stdout, "\n$ %s %s (via %s) -> %s\n", q.name, dns.TypeToString[q.qtype], via, dns.RcodeToString[r.Rcode])
		for _, rr := range r.Answer {
			fmt.Fprintf(stdout, "   %s\n", strings.Join(strings.Fields(rr.String()), " "))
		}
	}
	return exitOK
}
