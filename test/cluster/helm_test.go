package cluster

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// helmBin is the helm CLI: $DNSCONFIGURER_HELM, else the one
// test/testbin/helm.sh caches (built now if missing); the test skips
// without one unless the variable is set.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, ok := testkit.EnvBin(t, HelmEnv); ok {
		return p
	}
	out, err := exec.CommandContext(t.Context(), "bash", "../testbin/helm.sh").Output()
	if err != nil {
		t.Skipf("no helm CLI: test/testbin/helm.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestClusterHelm installs dnsconfigurer on the real one-node cluster with
// the helm CLI and charts/dnsconfigurer (the shim in front of Debian's
// containerd), runs `helm test`, the resolve proofs and the upstream DNS
// e2e specs on it, then uninstalls it.
func TestClusterHelm(t *testing.T) { testClusterHelm(t, AgentShim) }

// TestClusterHelmNRI is TestClusterHelm with the NRI plugin on containerd
// 2.x ($DNSCONFIGURER_CONTAINERD_BIN, or it skips).
func TestClusterHelmNRI(t *testing.T) { testClusterHelm(t, AgentNRI) }

func testClusterHelm(t *testing.T, agent string) {
	helm := helmBin(t)
	withCluster(t, Options{Agent: agent}, "agent "+agent+", installed with helm", func(t *testing.T, c *Cluster, st *steps) {
		ok := st.run(t, "install", func(t *testing.T) {
			ctx := testContext(t, 5*time.Minute)
			begin := time.Now()
			out, err := c.DeployHelm(ctx, helm)
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, out, c.describeNamespace(DeployNamespace))
			}
			t.Logf("helm install: available in %s:\n%s", time.Since(begin).Round(time.Millisecond), out)
		})
		if !ok {
			return
		}
		st.run(t, "helm-test", func(t *testing.T) {
			ctx := testContext(t, 3*time.Minute)
			out, err := c.Helm(ctx, helm, "test", HelmRelease, "-n", HelmNamespace)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("helm test:\n%s", out)
			if !strings.Contains(out, "Phase:          Succeeded") && !strings.Contains(out, "Phase: Succeeded") {
				t.Errorf("helm test did not report success:\n%s", out)
			}
		})
		st.proofs(t, c, proof{"resolve", testResolve}, proof{"conformance", func(t *testing.T, c *Cluster) { testConformance(t, c) }})
		st.run(t, "uninstall", func(t *testing.T) {
			ctx := testContext(t, 3*time.Minute)
			out, err := c.Helm(ctx, helm, "uninstall", HelmRelease, "-n", HelmNamespace, "--wait")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("helm uninstall:\n%s", out)
			err = waitFor(ctx, "the cluster DNS Deployment gone", func(ctx context.Context) (bool, error) {
				_, err := c.Client.AppsV1().Deployments(DeployNamespace).Get(ctx, DNSDeployment, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, nil
				}
				return false, err
			})
			if err != nil {
				t.Error(err)
			}
		})
	})
}
