package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HelmEnv names the helm CLI (test/testbin/helm.sh prints it).
const HelmEnv = "DNSCONFIGURER_HELM"

// HelmRelease is the release DeployHelm installs, in kube-system (the
// chart's README).
const (
	HelmRelease   = "dnsconfigurer"
	HelmNamespace = "kube-system"
)

// ChartDir returns the repository's Helm chart.
func ChartDir() (string, error) { return repoDir("charts/dnsconfigurer", "Chart.yaml") }

// Helm runs the helm CLI at bin against this cluster, in the node's
// network namespace as kubectl, with helm's own directories under the
// cluster's, and returns its output.
func (c *Cluster) Helm(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := c.Command(ctx, bin, args...)
	cmd.Env = append(cmd.Env,
		"HELM_CACHE_HOME="+c.path("helm/cache"), "HELM_CONFIG_HOME="+c.path("helm/config"), "HELM_DATA_HOME="+c.path("helm/data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// DeployHelm installs charts/dnsconfigurer with the helm CLI at bin, with
// the values a one-node test cluster needs (what DeployDNS's overlay does
// for kustomize): the image imported on the node, no cert-manager (the
// webhook's certificate made here), the node's files in the cluster's
// directory, and for AgentNRI the harness's NRI socket and state
// directory; for the shim, no DaemonSet (the shim is the node's own
// process in front of containerd). It waits as DeployDNS does and returns
// helm's output.
func (c *Cluster) DeployHelm(ctx context.Context, bin string) (string, error) {
	chart, err := ChartDir()
	if err != nil {
		return "", err
	}
	cert, resolved, run, err := c.deployFiles()
	if err != nil {
		return "", err
	}
	certFile, keyFile := c.path("helm-webhook.crt"), c.path("helm-webhook.key")
	for p, b := range map[string][]byte{certFile: cert.Cert, keyFile: cert.Key} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return "", err
		}
	}
	image, tag, _ := strings.Cut(ProductImage, ":")
	args := []string{"install", HelmRelease, chart, "-n", HelmNamespace,
		"--set", "image.repository=" + image, "--set", "image.tag=" + tag,
		"--set", "agent=" + c.Agent,
		// This cluster has no kube-dns: the chart takes kubelet's
		// clusterDNS itself.
		"--set", "cluster.dns=" + ClusterDNS.String(), "--set", "cluster.dnsUpstream=" + ClusterDNSUpstream.String(),
		"--set", "webhook.certManager.enabled=false",
		"--set", "webhook.caBundle=" + base64.StdEncoding.EncodeToString(cert.CA),
		"--set-file", "webhook.tls.cert=" + certFile, "--set-file", "webhook.tls.key=" + keyFile,
		"--set", "node.resolvConf=" + c.NodeResolvConfPath(), "--set", "node.systemdResolveDir=" + resolved, "--set", "node.runDir=" + run,
		"--set", "test.image=" + DnsutilsImage,
	}
	rollouts := []struct{ kind, ns, name string }{
		{"deployment", DeployNamespace, DNSDeployment}, {"daemonset", NodeNamespace, NodeLocalDS}, {"deployment", DeployNamespace, WebhookName},
	}
	if c.Agent == AgentNRI {
		args = append(args, "--set", "nri.socketDir="+filepath.Dir(c.Node.NRISocket), "--set", "nri.stateDir="+c.NRIStateDir())
		rollouts = append(rollouts, struct{ kind, ns, name string }{"daemonset", NodeNamespace, NRIDS})
	} else {
		args = append(args, "--set", "shim.daemonSet.enabled=false")
	}
	out, err := c.Helm(ctx, bin, args...)
	if err != nil {
		return out, err
	}
	for _, w := range rollouts {
		if err := c.WaitRollout(ctx, w.kind, w.ns, w.name); err != nil {
			return out, err
		}
	}
	return out, nil
}
