package v1alpha1

import "fmt"

// External answers Services' external addresses under outside zones, as
// CoreDNS's k8s_external plugin: <service>.<namespace>.<zone> has the
// Service's spec.externalIPs and LoadBalancer ingress IPs.
type External struct {
	// Zones are the outside zones, e.g. ["example.org"].
	Zones []string `json:"zones,omitempty"`
	// Apex is the label of the zones' name server: the SOA names
	// ns1.<apex>.<zone> and hostmaster.<apex>.<zone> (default "dns").
	Apex string `json:"apex,omitempty"`
	// TTL of every answer and the SOA minimum, 0-3600 (default 5).
	TTL *int `json:"ttl,omitempty"`
	// Fallthrough forwards a name of the zones that does not exist
	// (NXDOMAIN) instead of answering it.
	Fallthrough bool `json:"fallthrough,omitempty"`
}

// TTLValue is the ttl, its default when unset.
func (x External) TTLValue() int { return deref(x.TTL, DefaultExternalTTL) }

// DefaultExternalApex and DefaultExternalTTL are k8s_external's defaults.
const (
	DefaultExternalApex = "dns"
	DefaultExternalTTL  = 5
)

func (x *External) setDefaults() {
	if x == nil || len(x.Zones) == 0 {
		return
	}
	setString(&x.Apex, DefaultExternalApex)
	setPtr(&x.TTL, DefaultExternalTTL)
}

func (x *External) validate(e *fieldErrors, mode string) {
	if x == nil {
		return
	}
	if mode == ModeNodeLocal && len(x.Zones) > 0 {
		e.add("external", "not used in mode %q: the cluster DNS answers it (nodeLocal.clusterConfig)", ModeNodeLocal)
	}
	for i, z := range x.Zones {
		if _, err := normalizeName(z); err != nil {
			e.add(fmt.Sprintf("external.zones[%d]", i), "%q: %v", z, err)
		}
	}
	if x.Apex != "" {
		if _, err := normalizeName(x.Apex); err != nil {
			e.add("external.apex", "%q: %v", x.Apex, err)
		}
	}
	if x.TTL != nil && (*x.TTL < 0 || *x.TTL > MaxRecordTTL) {
		e.add("external.ttl", "%d: must be between 0 and %d", *x.TTL, MaxRecordTTL)
	}
}

// The external zones' rules in ServerFieldRules (the schema).
func init() {
	r := ServerFieldRules
	r["external.zones[]"] = FieldRule{Pattern: nameRule.Pattern, Says: nameRule.Says, MaxLength: nameMax}
	apex := pattern("|"+name, nameRule.Says)
	apex.MaxLength = nameMax
	r["external.apex"] = apex
	r["external.ttl"] = ints(0, MaxRecordTTL)
}
