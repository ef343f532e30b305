package v1alpha1

import "fmt"

// Values of PodPolicy.DefaultDNSPolicy and of the LabelDNSPolicy label
// (and pod annotation).
const (
	DNSPolicyClusterFirst             = "ClusterFirst"
	DNSPolicyClusterFirstWithAutopath = "ClusterFirstWithAutopath"
)

// DefaultDNSPolicy is PodPolicy.DefaultDNSPolicy when unset: kubelet's.
const DefaultDNSPolicy = DNSPolicyClusterFirst

// LabelDNSPolicy is the Namespace label (and pod annotation) that chooses
// a namespace's policy when PodPolicy.NamespaceLabels is set.
const LabelDNSPolicy = "dnsconfigurer.io/dns-policy"

// MaxNdots is the largest ndots glibc's resolver accepts (RES_MAXNDOTS).
const MaxNdots = 15

// ValidateNdots reports an ndots outside 0 to MaxNdots, or nil. Every
// component checks ndots here.
func ValidateNdots(n int) error {
	if n < 0 || n > MaxNdots {
		return fmt.Errorf("%d must be between 0 and %d", n, MaxNdots)
	}
	return nil
}

// PodPolicy is the cluster's DNS policy for pods that did not choose one,
// shared by the shim, the NRI plugin and the webhook:
//
//	defaultDNSPolicy: ClusterFirstWithAutopath
//	namespaceLabels: true     # read Namespace labels (list/watch namespaces)
//	ndots: 2
//
// A pod's annotation dnsconfigurer.io/dns-policy wins over its namespace's
// label of that name, which wins over defaultDNSPolicy; dnsPolicy None and a
// pod's own dnsConfig.options ndots always win.
type PodPolicy struct {
	// DefaultDNSPolicy is the policy of pods without the annotation or
	// namespace label: "ClusterFirst" (default: kubelet's) or
	// "ClusterFirstWithAutopath". ClusterFirstWithAutopath upgrades only
	// the pods whose effective policy is ClusterFirst: dnsPolicy
	// ClusterFirst, or ClusterFirstWithHostNet off the host network.
	// hostNetwork, Default and None pods keep theirs.
	DefaultDNSPolicy string `json:"defaultDNSPolicy,omitempty"`
	// NamespaceLabels reads the dnsconfigurer.io/dns-policy label of each
	// Namespace (ClusterFirstWithAutopath, or ClusterFirst to opt the
	// namespace out of defaultDNSPolicy). It needs list and watch on
	// namespaces: a ServiceAccount with the ClusterRole of deploy/, not
	// kubelet's node credentials (the Node authorizer does not allow
	// them). Without an API server the labels are unknown and only
	// defaultDNSPolicy applies. The webhook does not read namespaces: its
	// warning says a label may change the outcome.
	NamespaceLabels bool `json:"namespaceLabels,omitempty"`
	// Ndots, when set (0 to 15), replaces kubelet's ndots:5 for cluster
	// DNS pods (ClusterFirst and autopath) whose dnsConfig.options do not
	// set ndots.
	Ndots *int `json:"ndots,omitempty"`
}

// SetDefaults fills unset fields.
func (p *PodPolicy) SetDefaults() {
	setString(&p.DefaultDNSPolicy, DefaultDNSPolicy)
}

// Validate reports the first invalid field by its path under prefix.
func (p *PodPolicy) Validate(prefix string) error {
	if err := either(prefix+"defaultDNSPolicy", p.DefaultDNSPolicy, DNSPolicyClusterFirst, DNSPolicyClusterFirstWithAutopath); err != nil {
		return err
	}
	if p.Ndots != nil {
		if err := ValidateNdots(*p.Ndots); err != nil {
			return fmt.Errorf("%sndots: %w", prefix, err)
		}
	}
	return nil
}
