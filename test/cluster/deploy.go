package cluster

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// Objects of deploy/ the tests look at.
const (
	DeployNamespace = "dnsconfigurer"
	// NodeNamespace holds the node DaemonSets (Pod Security privileged).
	NodeNamespace = "dnsconfigurer-node"
	DNSDeployment = "dnsconfigurer-dns"
	// DNSService is the cluster DNS Service (and, with "-upstream", the
	// node-local stage's upstream Service).
	DNSService  = "dnsconfigurer-dns"
	NodeLocalDS = "dnsconfigurer-node-local-dns"
	WebhookName = "dnsconfigurer-webhook"
	NRIDS       = "dnsconfigurer-nri"
)

// DeployDir returns the repository's deploy/ directory.
func DeployDir() (string, error) { return repoDir("deploy", "kustomization.yaml") }

// repoDir returns the absolute path of rel in the repository, checked by
// the file marker it must hold.
func repoDir(rel, marker string) (string, error) {
	root, err := containerd.ModuleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, rel)
	if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
		return "", fmt.Errorf("%s/: %w", rel, err)
	}
	return filepath.Abs(dir)
}

// DeployDNS applies the project's deploy/ base (deploy/overlays/nri when
// the agent is AgentNRI) with `kubectl apply -k`, through an overlay that
// fits this cluster, and waits until the cluster DNS Deployment, the
// node-local DaemonSet, the webhook (and the NRI plugin's DaemonSet) are
// available. The overlay changes only what a one-node test cluster needs:
//   - the shim's DaemonSet is left out: here the shim is the node's own
//     process in front of containerd, since kubelet needs it to start
//     any pod at all;
//   - the NRI plugin reads the harness's NRI socket directory and the
//     cluster's node resolv.conf, and keeps its files in the cluster's
//     directory (the same path inside its container as on the node, as
//     deploy/nri requires);
//   - no cert-manager: the webhook's serving certificate is made here and
//     given as the Secret deploy/webhook/certificate.yaml describes, with
//     its CA as the caBundle;
//   - the node-local stage reads the node's resolv.conf file of this
//     cluster instead of the machine's /etc/resolv.conf, and keeps its
//     lock in the cluster's directory instead of the machine's
//     /run/dnsconfigurer.
//
// It returns kubectl's output.
func (c *Cluster) DeployDNS(ctx context.Context) (string, error) {
	overlay, err := c.writeOverlay()
	if err != nil {
		return "", err
	}
	out, err := c.Kubectl(ctx, "apply", "-k", overlay)
	if err != nil {
		return out, err
	}
	rollouts := []struct{ kind, ns, name string }{
		{"deployment", DeployNamespace, DNSDeployment}, {"daemonset", NodeNamespace, NodeLocalDS}, {"deployment", DeployNamespace, WebhookName},
	}
	if c.Agent == AgentNRI {
		rollouts = append(rollouts, struct{ kind, ns, name string }{"daemonset", NodeNamespace, NRIDS})
	}
	for _, w := range rollouts {
		if err := c.WaitRollout(ctx, w.kind, w.ns, w.name); err != nil {
			return out, err
		}
	}
	return out, nil
}

// WaitRollout waits until a Deployment or DaemonSet has every replica of
// its current generation updated and available.
func (c *Cluster) WaitRollout(ctx context.Context, kind, namespace, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return waitFor(ctx, kind+" "+namespace+"/"+name, func(ctx context.Context) (bool, error) {
		switch kind {
		case "deployment":
			d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return deploymentDone(d), fmt.Errorf("status %+v", d.Status)
		case "daemonset":
			d, err := c.Client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := d.Status
			done := s.ObservedGeneration >= d.Generation && s.DesiredNumberScheduled > 0 &&
				s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled
			return done, fmt.Errorf("status %+v", s)
		}
		return false, fmt.Errorf("unknown kind %q", kind)
	})
}

func deploymentDone(d *appsv1.Deployment) bool {
	s := d.Status
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}

// writeOverlay writes the kustomize overlay for this cluster and returns
// its directory.
func (c *Cluster) writeOverlay() (string, error) {
	base, err := DeployDir()
	if err != nil {
		return "", err
	}
	if c.Agent == AgentNRI {
		base = filepath.Join(base, "overlays", "nri")
	}
	if c.ipv6Only {
		if base, err = c.ipv6Deploy(base); err != nil {
			return "", err
		}
	}
	return c.WriteOverlayFor(base, "deploy-overlay")
}

// ipv6Deploy copies deploy/ with the IPv6 cluster DNS addresses in its
// cluster-settings.yaml, as deploy/README.md tells an operator to set
// them, and returns the copy's entry point.
func (c *Cluster) ipv6Deploy(base string) (string, error) {
	dir := c.path("deploy-ipv6")
	if err := run(context.Background(), "cp", "-r", base, dir); err != nil {
		return "", err
	}
	settings := filepath.Join(dir, "cluster-settings.yaml")
	b, err := os.ReadFile(settings)
	if err != nil {
		return "", err
	}
	s := string(b)
	for _, r := range []struct{ key, v4, v6 string }{
		{"clusterDNS", ClusterDNS.String(), ClusterDNS6.String()},
		{"clusterDNSUpstream", ClusterDNSUpstream.String(), ClusterDNSUpstream6.String()},
	} {
		old := "  " + r.key + ": " + r.v4 + "\n"
		if !strings.Contains(s, old) {
			return "", fmt.Errorf("%s: no %q", settings, strings.TrimSpace(old))
		}
		s = strings.Replace(s, old, "  "+r.key+": \""+r.v6+"\"\n", 1)
	}
	return dir, os.WriteFile(settings, []byte(s), 0o644)
}

// deployFiles makes what every deploy of the DNS parts needs on this
// cluster: the webhook's serving certificate, and the node directories
// the DaemonSets mount (systemd-resolved's, the agents' run directory and
// the NRI state directory).
func (c *Cluster) deployFiles() (cert apiserver.ServingCert, resolved, run string, err error) {
	host := WebhookName + "." + DeployNamespace + ".svc"
	cert, err = apiserver.NewServingCert(host, []string{host, strings.TrimSuffix(host, ".svc")}, nil)
	if err != nil {
		return cert, "", "", err
	}
	resolved, run = c.path("systemd-resolve"), c.path("run-dnsconfigurer")
	for _, d := range []string{resolved, run, c.NRIStateDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return cert, "", "", err
		}
	}
	return cert, resolved, run, nil
}

// WriteOverlayFor writes, in the cluster directory's subdirectory name, an
// overlay of the kustomization in base with what this cluster needs (see
// DeployDNS), and returns its directory. base may be any entry point of
// deploy/ or a copy of one.
func (c *Cluster) WriteOverlayFor(base, name string) (string, error) {
	dir := c.path(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return "", err
	}
	cert, resolved, run, err := c.deployFiles()
	if err != nil {
		return "", err
	}
	secret := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: dnsconfigurer-webhook-tls
  namespace: %s
type: kubernetes.io/tls
data:
  tls.crt: %s
  tls.key: %s
`, DeployNamespace, base64.StdEncoding.EncodeToString(cert.Cert), base64.StdEncoding.EncodeToString(cert.Key))
	agentPatch := `- patch: |
    $patch: delete
    apiVersion: apps/v1
    kind: DaemonSet
    metadata:
      name: dnsconfigurer-shim
      namespace: dnsconfigurer-node
`
	if c.Agent == AgentNRI {
		agentPatch = c.nriPatch(resolved)
	}
	kustomization := fmt.Sprintf(`# Written by test/cluster: deploy/ for a one-node test cluster (see DeployDNS).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
- webhook-tls.yaml
patches:
%s- target:
    group: cert-manager.io
  patch: |
    $patch: delete
    apiVersion: cert-manager.io/v1
    kind: Any
    metadata:
      name: any
- target:
    kind: ValidatingWebhookConfiguration
    name: dnsconfigurer
  patch: |
    - op: remove
      path: /metadata/annotations/cert-manager.io~1inject-ca-from
    - op: add
      path: /webhooks/0/clientConfig/caBundle
      value: %s
- target:
    kind: DaemonSet
    name: %s
  patch: |
    - op: replace
      path: /spec/template/spec/volumes/0/hostPath/path
      value: %s
    - op: replace
      path: /spec/template/spec/volumes/1/hostPath/path
      value: %s
    - op: replace
      path: /spec/template/spec/volumes/2/hostPath/path
      value: %s
%s`, rel, agentPatch, base64.StdEncoding.EncodeToString(cert.CA), NodeLocalDS, c.NodeResolvConfPath(), resolved, run, c.familyPatch())
	for name, content := range map[string]string{"kustomization.yaml": kustomization, "webhook-tls.yaml": secret} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// familyPatch gives a dual-stack cluster's DNS Services an IPv6
// ClusterIP too (PreferDualStack, IPv4 first), and the node-local stage
// NodeLocalDNS6 and the IPv6 cluster DNS address besides the IPv4 ones;
// on an IPv6-only cluster it moves the stage's link-local address to
// NodeLocalDNS6; "" on an IPv4 cluster.
func (c *Cluster) familyPatch() string {
	if c.ipv6Only {
		// The Services take their IPv6 address from cluster-settings.yaml
		// (ipv6Deploy); the stage's link-local IPv4 address becomes
		// NodeLocalDNS6.
		return fmt.Sprintf(`- target:
    kind: DaemonSet
    name: %s
  patch: |
    - op: test
      path: /spec/template/spec/containers/0/args/4
      value: --local-ip=%s
    - op: replace
      path: /spec/template/spec/containers/0/args/4
      value: --local-ip=%s
`, NodeLocalDS, NodeLocalDNS, NodeLocalDNS6)
	}
	if !c.dualStack {
		return ""
	}
	var b strings.Builder
	for _, s := range []struct {
		name   string
		v4, v6 netip.Addr
	}{{DNSService, ClusterDNS, ClusterDNS6}, {DNSService + "-upstream", ClusterDNSUpstream, ClusterDNSUpstream6}} {
		fmt.Fprintf(&b, `- target:
    kind: Service
    name: %s
  patch: |
    - op: add
      path: /spec/ipFamilyPolicy
      value: PreferDualStack
    - op: add
      path: /spec/clusterIPs
      value: [%q, %q]
`, s.name, s.v4, s.v6)
	}
	fmt.Fprintf(&b, `- target:
    kind: DaemonSet
    name: %s
  patch: |
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --local-ip=%s
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --local-ip=%s
`, NodeLocalDS, NodeLocalDNS6, ClusterDNS6)
	return b.String()
}

// NRIStateDir is the NRI plugin's --state-dir: <pod uid>/resolv.conf
// files, on the node and at the same path in the plugin's container.
func (c *Cluster) NRIStateDir() string { return c.path("nri-state") }

// nriPatchFormat is nriPatch's JSON patch, a fmt format.
//
//go:embed testdata/nri-patch.yaml
var nriPatchFormat string

// nriPatch points the NRI plugin's host paths at this cluster: the
// harness's directory, where containerd 2.x's NRI socket is (nri.sock,
// the name --socket expects), the node resolv.conf, and the state
// directory at one path inside and out.
func (c *Cluster) nriPatch(resolved string) string {
	return fmt.Sprintf(nriPatchFormat, NRIDS, filepath.Dir(c.Node.NRISocket), c.NRIStateDir(), c.NodeResolvConfPath(), resolved)
}
