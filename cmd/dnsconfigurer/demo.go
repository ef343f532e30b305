package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// demoClusterDNS is the demo node's kubelet clusterDNS, kubeadm's: the
// first address of the Service CIDR 10.96.0.0/12 after the API server's
// (10.96.0.1). No example Service may take it.
const demoClusterDNS = v1alpha1.DefaultRenderClusterDNS

// demoNode is the demo node's kubelet settings: demoClusterDNS and the
// default cluster domain.
var demoNode = v1alpha1.NodeDNS{ClusterDNS: []string{demoClusterDNS}}

// runDemo is the newcomer's first command: no cluster, no root, loopback only.
func runDemo(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr, "usage: dnsconfigurer demo [--pod POD.yaml] [--resolv-conf PATH] [--objects DIR]")
	podFile := fs.String("pod", "examples/pod.yaml", "pod manifest to render")
	resolv := fs.String("resolv-conf", "examples/node-resolv.conf", "the node's resolv.conf")
	objects := fs.String("objects", "examples/objects", "manifests the cluster DNS serves")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	host := podfacts.ReadHost(*resolv, v1alpha1.DefaultNodeOS)
	if err := demoRender(*podFile, *resolv, host, stdin, stdout); err != nil {
		return exitCode(stderr, "demo", err)
	}
	cluster, local, err := demoServe(ctx, *objects, host, stdout)
	if err != nil {
		return exitCode(stderr, "demo", err)
	}
	defer cluster.Shutdown(context.WithoutCancel(ctx))
	defer local.Shutdown(context.WithoutCancel(ctx))
	return exitCode(stderr, "demo", demoQuery(ctx, cluster.Addrs()[0], local.Addrs()[0], stdout))
}

// demoRender prints the pod's resolv.conf as written and with autopath.
func demoRender(podFile, resolv string, host policy.Host, stdin io.Reader, stdout io.Writer) error {
	pod, err := readPod(podFile, stdin)
	if err != nil {
		return usageError{err}
	}
	eng, err := policy.New(policy.NodeOf(demoNode, v1alpha1.PodPolicy{}, nil))
	if err != nil {
		return err
	}
	in := podspec.Input(pod)
	for _, variant := range []struct{ title, annotation string }{
		{"as written", in.PolicyAnnotation},
		{"with dnsconfigurer.io/dns-policy: ClusterFirstWithAutopath", string(policy.ClusterFirstWithAutopath)},
	} {
		in.PolicyAnnotation = variant.annotation
		r, err := eng.Compute(in, host)
		if err != nil {
			return fmt.Errorf("render %s: %w", podFile, err)
		}
		fmt.Fprintf(stdout, "== resolv.conf of pod %s/%s %s (node resolv.conf %s)\n%s", pod.Namespace, pod.Name, variant.title, resolv,
			resolvconf.Format(r.Config()))
		for _, w := range r.Warnings {
			fmt.Fprintf(stdout, "   warning %s: %s\n", w.Reason, w.Message)
		}
	}
	return nil
}

// demoServe starts the cluster DNS on the example objects and the
// node-local stage in front of it, both on loopback.
func demoServe(ctx context.Context, objects string, host policy.Host, stdout io.Writer) (cluster, local *dnsserver.Server, err error) {
	zone := demoNode.Domain()
	st, err := store.New(store.Options{Zone: zone, TTL: v1alpha1.DefaultRecordTTL, Pods: store.PodsVerified})
	if err != nil {
		return nil, nil, err
	}
	// What does not load is skipped, as serve skips it, and listed below.
	objs, err := kubefeed.LoadManifests(objects)
	var skipped kubefeed.ManifestErrors
	if err != nil && !errors.As(err, &skipped) {
		return nil, nil, usagef("--objects: %v", err)
	}
	st.Replace(objs)
	st.Publish()
	ap, _ := clusterdns.WithAutopath(0, nil)
	cluster = &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: clusterdns.NewHandler(zone, st, ap)}
	if err := cluster.Start(ctx); err != nil {
		return nil, nil, err
	}
	fwd, _ := forward.New(forward.Config{Upstreams: forward.StaticUpstreams(cluster.Addrs()), Policy: forward.PolicyRoundRobin})
	nl, _ := nodelocal.New(fwd, nodelocal.Config{ClusterDomain: zone, HostSearches: func() []string { return host.Searches }})
	local = &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: nl}
	if err := local.Start(ctx); err != nil {
		_ = cluster.Shutdown(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	fmt.Fprintf(stdout, "\n== cluster DNS on %s serving %s (%d Services); node-local stage on %s\n", cluster.Addrs()[0], objects, len(objs.Services), local.Addrs()[0])
	for _, e := range skipped {
		fmt.Fprintf(stdout, "   skipped %v\n", e)
	}
	return cluster, local, nil
}

// demoQuery resolves the example names through the cluster DNS and the
// node-local stage and prints the answers.
func demoQuery(ctx context.Context, cluster, local string, stdout io.Writer) error {
	queries := []struct {
		via   string
		name  string
		qtype uint16
	}{
		{cluster, "web.prod.svc.cluster.local.", dns.TypeA},
		{cluster, "web.prod.svc.cluster.local.", dns.TypeAAAA},
		{cluster, "_http._tcp.web.prod.svc.cluster.local.", dns.TypeSRV},
		{cluster, "db.prod.svc.cluster.local.", dns.TypeA},
		{cluster, "dns-version.cluster.local.", dns.TypeTXT},
		{cluster, "30.0.96.10.in-addr.arpa.", dns.TypePTR},
		{cluster, "nosuch.prod.svc.cluster.local.", dns.TypeA},
		{local, "web.search.prod.cluster.local.ap.k8s.io.", dns.TypeA},
		{local, "kubernetes.default.search.prod.cluster.local.ap.k8s.io.", dns.TypeA},
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	for _, q := range queries {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		r, _, err := c.ExchangeContext(ctx, m, q.via)
		if err != nil {
			return fmt.Errorf("%s %s: %w", q.name, dns.TypeToString[q.qtype], err)
		}
		via := "cluster DNS"
		if q.via == local {
			via = "node-local"
		}
		fmt.Fprintf(stdout, "\n$ %s %s (via %s) -> %s\n", q.name, dns.TypeToString[q.qtype], via, dns.RcodeToString[r.Rcode])
		for _, rr := range r.Answer {
			fmt.Fprintf(stdout, "   %s\n", strings.Join(strings.Fields(rr.String()), " "))
		}
	}
	return nil
}
