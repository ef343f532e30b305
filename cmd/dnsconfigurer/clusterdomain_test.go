package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/webhook"
)

// TestEmptyClusterDomainAgrees: an empty cluster domain, as a flag or in a
// config file, is no cluster domain in render, the shim, the NRI plugin,
// the webhook and explain, as kubelet's empty clusterDomain. A ClusterFirst
// pod then gets the node's search list unchanged (kubelet-dns-behaviour.md,
// A4); unset, the domain is cluster.local.
func TestEmptyClusterDomainAgrees(t *testing.T) {
	dir := t.TempDir()
	resolv := writeFile(t, filepath.Join(dir, "resolv.conf"), "nameserver 192.0.2.53\nsearch corp.example\n")
	host := policy.Host{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}}
	head := "apiVersion: dnsconfigurer.io/v1alpha1\nkind: "
	file := func(kind, body string) string {
		return writeFile(t, filepath.Join(dir, kind+".yaml"), head+kind+"\nclusterDNS: [10.96.0.10]\nclusterDomain: \"\"\n"+body)
	}
	shimFile, nriFile := file("ShimConfiguration", ""), file("NRIConfiguration", "")
	webhookFile := writeFile(t, filepath.Join(dir, "webhook.yaml"), head+"WebhookConfiguration\ncluster: {clusterDNS: [10.96.0.10], clusterDomain: \"\"}\n")
	tls := []string{"--tls-cert-file", "/tls.crt", "--tls-private-key-file", "/tls.key"}

	agent := func(parse func([]string, io.Writer) (engineInputs, error)) func([]string) (*policy.Engine, error) {
		return func(args []string) (*policy.Engine, error) {
			in, err := parse(args, io.Discard)
			if err != nil {
				return nil, err
			}
			return nodeEngine(in.node, in.policy, in.nodeIPs, slog.New(slog.DiscardHandler))
		}
	}
	shim := agent(func(args []string, w io.Writer) (engineInputs, error) {
		cfg, _, err := shimCommand.parse(append(args, "--resolv-conf", resolv), w)
		if err != nil {
			return engineInputs{}, err
		}
		return engineInputs{cfg.NodeDNS, cfg.PodPolicy, cfg.NodeIPs}, nil
	})
	nri := agent(func(args []string, w io.Writer) (engineInputs, error) {
		cfg, _, err := nriCommand.parse(append(args, "--resolv-conf", resolv), w)
		if err != nil {
			return engineInputs{}, err
		}
		return engineInputs{cfg.NodeDNS, cfg.PodPolicy, nil}, nil
	})
	webhook := func(args []string) (*policy.Engine, error) {
		cfg, _, err := parseWebhookFlags(append(args, tls...), io.Discard)
		if err != nil {
			return nil, err
		}
		r, _, err := webhook.NewReviewer(cfg)
		if err != nil {
			return nil, err
		}
		return r.Default.Engine, nil
	}
	explain := func(domain string) func([]string) (*policy.Engine, error) {
		return func([]string) (*policy.Engine, error) {
			s := nodesettings.Settings{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: domain, NodeOS: v1alpha1.NodeOSLinux}
			return nodeEngine(s.NodeDNS(), s.PodPolicy, nil, slog.New(slog.DiscardHandler))
		}
	}
	none := []string{"corp.example"}
	local := []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}
	tests := []struct {
		name   string
		engine func([]string) (*policy.Engine, error)
		args   []string
		want   []string
	}{
		{"shim flag", shim, []string{"--cluster-dns", "10.96.0.10", "--cluster-domain", ""}, none},
		{"shim file", shim, []string{"--config", shimFile}, none},
		{"shim unset", shim, []string{"--cluster-dns", "10.96.0.10"}, local},
		{"nri flag", nri, []string{"--cluster-dns", "10.96.0.10", "--cluster-domain", ""}, none},
		{"nri file", nri, []string{"--config", nriFile}, none},
		{"nri unset", nri, []string{"--cluster-dns", "10.96.0.10"}, local},
		{"webhook flag", webhook, []string{"--cluster-dns", "10.96.0.10", "--cluster-domain", ""}, none},
		{"webhook file", webhook, []string{"--config", webhookFile}, none},
		{"webhook unset", webhook, []string{"--cluster-dns", "10.96.0.10"}, local},
		{"explain (the agent's settings)", explain(""), nil, none},
		{"explain unset", explain("cluster.local"), nil, local},
	}
	in := policy.Input{Name: "web-0", Namespace: "shop", Policy: policy.ClusterFirst}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", "")
			eng, err := tt.engine(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			res, err := eng.Compute(in, host)
			if err != nil || !slices.Equal(res.Searches, tt.want) {
				t.Errorf("searches %q (%v), want %q", res.Searches, err, tt.want)
			}
		})
	}
	// render, end to end: the same pod (shop/web-0) on the same node.
	for _, tc := range []struct {
		args []string
		want []string
	}{{[]string{"--cluster-domain", ""}, none}, {nil, local}} {
		args := append([]string{"render", "-f", "testdata/pods/clusterfirst.yaml", "--resolv-conf", resolv, "-o", "json"}, tc.args...)
		code, stdout, stderr := run(t, "", args...)
		var j renderJSON
		if err := json.Unmarshal([]byte(stdout), &j); code != exitOK || err != nil || !slices.Equal(j.Searches, tc.want) {
			t.Errorf("render %q: exit %d, searches %q (%v, %s), want %q", tc.args, code, j.Searches, err, stderr, tc.want)
		}
	}
}

// engineInputs are what an agent builds its engine from.
type engineInputs struct {
	node    v1alpha1.NodeDNS
	policy  v1alpha1.PodPolicy
	nodeIPs []string
}
