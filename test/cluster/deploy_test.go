package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testDeploy applies deploy/ with kubectl apply -k (DeployDNS), then
// checks what the real controllers made of it: the cluster DNS pods are
// Ready behind the Service at ClusterDNS, whose EndpointSlice the
// EndpointSlice controller wrote with every pod's address.
func testDeploy(t *testing.T, c *Cluster) {
	ctx := testContext(t, 5*time.Minute)
	begin := time.Now()
	out, err := c.DeployDNS(ctx)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, c.describeNamespace(DeployNamespace))
	}
	t.Logf("deploy/ applied and available in %s:\n%s", time.Since(begin).Round(time.Millisecond), out)

	svc, err := c.Client.CoreV1().Services(DeployNamespace).Get(ctx, DNSDeployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != ClusterDNS.String() {
		t.Errorf("DNS Service clusterIP %s, want kubelet's clusterDNS %s", svc.Spec.ClusterIP, ClusterDNS)
	}
	pods, err := c.Client.CoreV1().Pods(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=dns"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range pods.Items {
		want = append(want, p.Status.PodIP)
	}
	slices.Sort(want)
	err = waitFor(ctx, "EndpointSlice of the DNS Service", func(ctx context.Context) (bool, error) {
		slices_, err := c.Client.DiscoveryV1().EndpointSlices(DeployNamespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + DNSDeployment})
		if err != nil {
			return false, err
		}
		var got []string
		for _, s := range slices_.Items {
			if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, e.Addresses...)
				}
			}
		}
		slices.Sort(got)
		return len(want) == 2 && slices.Equal(got, want), nil
	})
	if err != nil {
		t.Errorf("%v (DNS pods %v)", err, want)
	}
}

// describeNamespace returns kubectl get/describe output for failures.
func (c *Cluster) describeNamespace(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := c.Kubectl(ctx, "-n", ns, "get", "all,events", "-o", "wide")
	d, _ := c.Kubectl(ctx, "-n", ns, "describe", "pods")
	return out + "\n" + d
}
