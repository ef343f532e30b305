package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// The cluster policy warning: what a pod that did not choose gets under
// the engines' DefaultPolicy and Ndots, nothing for the others.
func TestPolicyWarning(t *testing.T) {
	two := 2
	node := testNode
	node.DefaultPolicy, node.Ndots = policy.ClusterFirstWithAutopath, &two
	r := &Reviewer{Default: testPool(t, "", nil, node, testHost), ClusterPolicy: true}
	labels := &Reviewer{Default: r.Default, ClusterPolicy: true, NamespaceLabels: true}
	ndots3 := "3"
	tests := []struct {
		name string
		r    *Reviewer
		pod  *corev1.Pod
		want []string // substrings of the one warning; nil: no warning
	}{
		{"ClusterFirst pod", r, pod("web-0"), []string{
			"dnsconfigurer: cluster DNS policy: this pod gets ClusterFirstWithAutopath (search search.default.cluster.local.ap.k8s.io) and option ndots:2",
			"opt out: annotation dnsconfigurer.io/dns-policy=ClusterFirst, dnsConfig.options ndots"}},
		{"namespace labels", labels, pod("web-0"), []string{`a dnsconfigurer.io/dns-policy label on namespace "default" wins (not read by the webhook)`}},
		{"own ndots", r, pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots3}}}
		}), []string{"gets ClusterFirstWithAutopath (search search.default.cluster.local.ap.k8s.io); opt out: annotation"}},
		{"annotation opts out: only ndots", r, pod("web-0", func(p *corev1.Pod) {
			p.Annotations = map[string]string{policy.AnnotationDNSPolicy: "ClusterFirst"}
		}), []string{"this pod gets option ndots:2; opt out: dnsConfig.options ndots"}},
		{"annotation chose autopath: only ndots", r, pod("web-0", func(p *corev1.Pod) {
			p.Annotations = map[string]string{policy.AnnotationDNSPolicy: "ClusterFirstWithAutopath"}
		}), []string{"this pod gets option ndots:2;"}},
		{"Default pod", r, pod("web-0", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }), nil},
		{"hostNetwork pod", r, pod("web-0", func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirst
		}), nil},
		{"None pod", r, pod("web-0", func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}}
		}), nil},
		{"no cluster policy", testReviewer(t), pod("web-0"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			req := &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: "default",
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: runtime.RawExtension{Raw: raw}}
			resp, _, _, err := tc.r.Review(req)
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if tc.want == nil {
				if len(resp.Warnings) != 0 {
					t.Errorf("warnings %q, want none", resp.Warnings)
				}
				return
			}
			if len(resp.Warnings) != 1 {
				t.Fatalf("warnings %q, want one", resp.Warnings)
			}
			for _, s := range tc.want {
				if !strings.Contains(resp.Warnings[0], s) {
					t.Errorf("warning %q does not contain %q", resp.Warnings[0], s)
				}
			}
		})
	}
}
