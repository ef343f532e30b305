package fqdn

import "strings"

// Length limits from RFC 1123 and the Linux utsname nodename field.
const (
	MaxLabelLength     = 63  // a DNS label, and kubelet's hostname cap
	MaxSubdomainLength = 253 // a DNS subdomain
	MaxKernelHostname  = 64  // the kernel nodename, the cap on a setHostnameAsFQDN FQDN
)

// Label checks s as an RFC 1123 label: at most 63 characters of lowercase
// alphanumerics and '-', starting and ending alphanumeric. It returns the
// problems found, none when s is valid.
func Label(s string) []string {
	var msgs []string
	if len(s) > MaxLabelLength {
		msgs = append(msgs, "must be no more than 63 characters")
	}
	if strings.Contains(s, ".") {
		msgs = append(msgs, "must not contain dots")
	} else if !isLabel(s, false) {
		msgs = append(msgs, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')")
	}
	return msgs
}

// Subdomain checks s as an RFC 1123 subdomain: at most 253 characters of
// dot-separated lowercase labels.
func Subdomain(s string) []string {
	var msgs []string
	if len(s) > MaxSubdomainLength {
		msgs = append(msgs, "must be no more than 253 characters")
	}
	if !isDotted(s, false) {
		msgs = append(msgs, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')")
	}
	return msgs
}

// SearchDomain checks one dnsConfig search entry as the API server does with
// relaxed search validation (GA and locked on in Kubernetes 1.34, the only
// rule since 1.37, where the gate is gone): "." alone is valid;
// otherwise one trailing dot is dropped and the rest must be a subdomain whose
// labels may also start with '_' and contain '_' (e.g. _tcp.example.com).
// Labels are not limited to 63 characters. The returned value is the one the
// messages speak about (after the trailing dot was dropped).
func SearchDomain(s string) (checked string, msgs []string) {
	if s == "." {
		return s, nil
	}
	checked = strings.TrimSuffix(s, ".")
	if len(checked) > MaxSubdomainLength {
		msgs = append(msgs, "must be no more than 253 characters")
	}
	if !isDotted(checked, true) {
		msgs = append(msgs, "must consist of lower case alphanumeric characters, '-', '_' or '.', and each part must start with an alphanumeric character or '_' followed by an alphanumeric character and end with an alphanumeric character (e.g. 'example.com' or '_tcp.example.com')")
	}
	return checked, msgs
}

func isDotted(s string, underscore bool) bool {
	if s == "" {
		return false
	}
	for {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return isLabel(s, underscore)
		}
		if !isLabel(s[:i], underscore) {
			return false
		}
		s = s[i+1:]
	}
}

// isLabel matches [a-z0-9]([-a-z0-9]*[a-z0-9])? and, with underscore,
// _?[a-z0-9]([-_a-z0-9]*[a-z0-9])?. No length check.
func isLabel(s string, underscore bool) bool {
	if underscore && len(s) > 0 && s[0] == '_' {
		s = s[1:]
	}
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		if !alnum(c) && c != '-' && !(underscore && c == '_') {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
