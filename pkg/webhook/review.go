package webhook

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// Pool is the DNS settings of a group of nodes: the engine built from
// kubelet's settings there and the resolver config assumed in their
// resolv.conf.
type Pool struct {
	// Name names the pool in messages; "" for the nodes outside every pool.
	Name string
	// NodeSelector are the labels of the pool's nodes. A pod belongs to the
	// pool when its spec.nodeSelector holds all of them with equal values.
	NodeSelector map[string]string
	Engine       *policy.Engine
	Host         policy.Host
}

func (p *Pool) matches(sel map[string]string) bool {
	for k, v := range p.NodeSelector {
		if got, ok := sel[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Reviewer decides the admission of pods. Its fields must not change after
// the first Review; it is then safe for concurrent use.
type Reviewer struct {
	// Default is used for pods that belong to no pool. Its Engine is
	// required.
	Default Pool
	// Pools replace Default for the pods that belong to them; a pod in
	// several pools must pass each.
	Pools []Pool
	// DenyTrims denies the pods that kubelet would only trim, instead of
	// allowing them with warnings. A trim the pod cannot avoid, because it
	// sets no nameservers (or no search domains) of its own and the node's
	// settings alone pass the limit, stays a warning: denying it would
	// refuse every such pod on those nodes.
	DenyTrims bool
	// SkipWorkloads allows workloads (Deployments and the other kinds
	// with a pod template) without checking them, and without a warning.
	SkipWorkloads bool
	// ClusterPolicy is set when the engines carry a cluster policy
	// (policy.Node.DefaultPolicy, Ndots): an allowed pod that policy
	// changes gets a warning saying what it will get (PolicyWarning).
	ClusterPolicy bool
	// NamespaceLabels says the nodes also read the namespaces'
	// dnsconfigurer.io/dns-policy label, which the webhook does not (the
	// AdmissionReview does not carry them): the warning says a label on
	// the namespace takes precedence over the cluster default.
	NamespaceLabels bool
}

// Outcome is how a review ended, as counted by
// dnsconfigurer_webhook_reviews_total.
type Outcome string

// The outcomes of a review.
const (
	OutcomeAllowed Outcome = "allowed" // no problem found
	OutcomeWarned  Outcome = "warned"  // allowed with warnings
	OutcomeDenied  Outcome = "denied"
	OutcomeSkipped Outcome = "skipped" // not a Pod CREATE: allowed unchecked, with a warning
)

// Violation is one problem found, as reported to the API server.
type Violation struct {
	policy.FieldError
	// Deny is true when the violation denies the pod, false for a warning.
	Deny bool
}

// BadRequestError is a request the webhook cannot answer with an
// AdmissionResponse: the HTTP handler returns it as a 400 with its text.
type BadRequestError struct{ Reason string }

func (e *BadRequestError) Error() string { return e.Reason }

func badRequest(format string, args ...any) error {
	return &BadRequestError{Reason: fmt.Sprintf(format, args...)}
}

// WarningPrefix starts every warning the webhook returns, so that a user
// reading kubectl's "Warning:" lines knows where they come from.
const WarningPrefix = "dnsconfigurer: "

// The API server cuts every warning to 256 runes once the warnings of a
// response pass 4096 (k8s.io/apiserver endpoints/filters/warning.go). The
// webhook returns at most a few warnings, so it keeps each one under
// maxWarningRunes by shortening the lists it quotes, and so never reaches
// that budget.
const (
	shortWarningRunes = 256
	maxWarningRunes   = 512
)

// Review decides one AdmissionRequest. It returns a *BadRequestError for a
// request that cannot be decided (no uid, a Pod CREATE without a decodable
// object); any other request gets a response, with its UID.
func (r *Reviewer) Review(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, Outcome, []Violation, error) {
	if req == nil {
		return nil, "", nil, badRequest("the AdmissionReview has no request")
	}
	if req.UID == "" {
		return nil, "", nil, badRequest("request.uid is empty")
	}
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if workloadKind(req) {
		if r.SkipWorkloads {
			return resp, OutcomeSkipped, nil, nil
		}
		return r.reviewWorkload(req, resp)
	}
	if req.Kind.Group != "" || req.Kind.Version != "v1" || req.Kind.Kind != "Pod" || req.Resource.Resource != "pods" || req.SubResource != "" {
		what := req.Kind.Kind
		if req.Kind.Group != "" {
			what += "." + req.Kind.Group
		}
		res := req.Resource.Resource
		if req.SubResource != "" {
			res += "/" + req.SubResource
		}
		resp.Warnings = []string{fmt.Sprintf("%sa %s (resource %q) is not a Pod or a workload with a pod template, so its DNS settings were not checked; the webhook's rules should select only those", WarningPrefix, what, res)}
		return resp, OutcomeSkipped, nil, nil
	}
	if req.Operation != admissionv1.Create {
		resp.Warnings = []string{fmt.Sprintf("%soperation %s is not checked, only CREATE; the webhook's rules should select only CREATE", WarningPrefix, req.Operation)}
		return resp, OutcomeSkipped, nil, nil
	}
	if len(req.Object.Raw) == 0 {
		return nil, "", nil, badRequest("request.object is empty for a Pod CREATE")
	}
	pod, err := decodePod(req.Object.Raw)
	if err != nil {
		return nil, "", nil, badRequest("request.object is not a JSON Pod: %s", oneLine(err))
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	if pod.Name == "" {
		pod.Name = req.Name
	}
	podspec.Default(pod)
	vs, warnings := r.reviewPod(pod, nil, false)
	return r.respond(resp, "Pod", "", pod.Name, vs, warnings)
}

// reviewPod checks a pod (or a template made a pod) and returns the
// violations, their fields under prefix (nil: a Pod's own "spec..."), and
// the cluster policy warning. With unchanged, nothing denies: the DNS
// fields are as they were before this update, so a rule added since must
// not block the object.
func (r *Reviewer) reviewPod(pod *corev1.Pod, prefix *field.Path, unchanged bool) ([]Violation, []string) {
	in := podspec.Input(pod)
	pools := r.pools(pod.Spec.NodeSelector)
	errs, trims := r.check(in, pools)
	var vs []Violation
	for _, e := range errs {
		vs = append(vs, Violation{FieldError: under(prefix, e), Deny: !unchanged})
	}
	for _, t := range trims {
		vs = append(vs, Violation{FieldError: under(prefix, t), Deny: !unchanged && r.DenyTrims && podSets(pod.Spec.DNSConfig, t.Field)})
	}
	var warnings []string
	if r.ClusterPolicy && !slices.ContainsFunc(vs, func(v Violation) bool { return v.Deny }) {
		p := pools[0]
		if w := PolicyWarning(p.Engine, in, p.Host, r.NamespaceLabels); w != "" {
			warnings = append(warnings, w)
		}
	}
	return vs, warnings
}

// under moves a pod field error ("spec...", "metadata...") under a
// template's path.
func under(prefix *field.Path, e policy.FieldError) policy.FieldError {
	if prefix != nil && e.Field != "" {
		e.Field = prefix.String() + "." + e.Field
	}
	return e
}

// respond turns the violations and warnings of an object into the
// response: denied when one denies, else warned or allowed.
func (r *Reviewer) respond(resp *admissionv1.AdmissionResponse, kind, group, name string, vs []Violation, extra []string) (*admissionv1.AdmissionResponse, Outcome, []Violation, error) {
	var deny []policy.FieldError
	for _, v := range vs {
		if v.Deny {
			deny = append(deny, v.FieldError)
		} else {
			resp.Warnings = append(resp.Warnings, warning(v.FieldError))
		}
	}
	resp.Warnings = append(resp.Warnings, extra...)
	switch {
	case len(deny) > 0:
		resp.Allowed = false
		resp.Result = denial(kind, group, name, deny)
		return resp, OutcomeDenied, vs, nil
	case len(resp.Warnings) > 0:
		return resp, OutcomeWarned, vs, nil
	}
	return resp, OutcomeAllowed, nil, nil
}

// pools are the pools a pod with nodeSelector belongs to, Default when
// none.
func (r *Reviewer) pools(nodeSelector map[string]string) []*Pool {
	var pools []*Pool
	for i := range r.Pools {
		if r.Pools[i].matches(nodeSelector) {
			pools = append(pools, &r.Pools[i])
		}
	}
	if len(pools) == 0 {
		pools = []*Pool{&r.Default}
	}
	return pools
}

// PolicyWarning says what the cluster policy of e (policy.Node's
// DefaultPolicy and Ndots) gives a pod that did not choose: autopath from
// the cluster default, the cluster's ndots; "" when it changes nothing
// for the pod (its annotation chose, it is no ClusterFirst pod, its
// dnsConfig sets ndots). The pod's namespace label is not known here:
// with labels, the warning says one takes precedence.
func PolicyWarning(e *policy.Engine, in policy.Input, host policy.Host, labels bool) string {
	r, tr, err := e.ComputeExplained(in, host)
	if err != nil {
		return ""
	}
	var got, optOut []string
	for _, d := range tr {
		switch d.Rule {
		case "autopath.source.cluster-default":
			got = append(got, fmt.Sprintf("ClusterFirstWithAutopath (search %s)", strings.Join(r.Searches, " ")))
			optOut = append(optOut, "annotation "+policy.AnnotationDNSPolicy+"=ClusterFirst")
		case "options.ndots.cluster-default":
			if slices.Contains(r.Options, d.Added[0]) && !podSetsNdots(in.DNSConfig) {
				got = append(got, "option "+d.Added[0])
				optOut = append(optOut, "dnsConfig.options ndots")
			}
		}
	}
	if len(got) == 0 {
		return ""
	}
	msg := fmt.Sprintf("%scluster DNS policy: this pod gets %s; opt out: %s", WarningPrefix, strings.Join(got, " and "), strings.Join(optOut, ", "))
	if labels {
		msg += fmt.Sprintf("; a %s label on namespace %q wins (not read by the webhook)", policy.AnnotationDNSPolicy, in.Namespace)
	}
	return capWarning(msg)
}

// podSetsNdots reports a pod dnsConfig option named ndots.
func podSetsNdots(c *policy.DNSConfig) bool {
	if c == nil {
		return false
	}
	for _, o := range c.Options {
		if o.Name == "ndots" {
			return true
		}
	}
	return false
}

// podSets reports whether the pod's own dnsConfig has entries in the list a
// trim is reported on. kubelet appends the pod's entries after the node's
// and trims from the end, so they are what a trim drops first.
func podSets(c *corev1.PodDNSConfig, field string) bool {
	if c == nil {
		return false
	}
	switch field {
	case "spec.dnsConfig.nameservers":
		return len(c.Nameservers) > 0
	case "spec.dnsConfig.searches":
		return len(c.Searches) > 0
	}
	return true
}

// slimPod is the part of a Pod the review reads: podspec's field list and
// the node selector. Decoding only these fields skips the containers,
// volumes and status, which are most of a pod's JSON and of the decoding
// time.
type slimPod struct {
	Metadata podspec.Meta `json:"metadata"`
	Spec     struct {
		podspec.Spec
		NodeSelector podspec.NodeSelector `json:"nodeSelector"`
	} `json:"spec"`
}

// decodePod decodes the fields of a Pod that podspec.Input and the node
// pool choice read, as the API server reads JSON (podspec.Unmarshal).
func decodePod(raw []byte) (*corev1.Pod, error) {
	var s slimPod
	if err := podspec.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	pod := podspec.Fields{Metadata: s.Metadata, Spec: s.Spec.Spec}.Pod()
	pod.Spec.NodeSelector = s.Spec.NodeSelector
	return pod, nil
}

// check runs the engine for every pool the pod belongs to (r.pools: Default
// when none) and merges the results: a problem every pool reports is listed once
// as is, any other one names its pool. The API server's own warnings are
// dropped: it has already sent them to the client, since validating webhooks
// run after its validation.
func (r *Reviewer) check(in policy.Input, pools []*Pool) (errs, trims []policy.FieldError) {
	if len(pools) == 1 {
		v := pools[0].Engine.ValidateNode(in, pools[0].Host)
		return v.Errors, v.Trims
	}
	results := make([]policy.Validation, len(pools))
	for i, p := range pools {
		results[i] = p.Engine.ValidateNode(in, p.Host)
	}
	merge := func(get func(policy.Validation) []policy.FieldError) []policy.FieldError {
		var out []policy.FieldError
		seen := map[policy.FieldError]bool{}
		for i, res := range results {
			for _, e := range get(res) {
				if seen[e] {
					continue
				}
				all := true
				for _, other := range results {
					if !containsError(get(other), e) {
						all = false
						break
					}
				}
				if all {
					seen[e] = true
					out = append(out, e)
					continue
				}
				out = append(out, policy.FieldError{Field: e.Field,
					Message: fmt.Sprintf("%s (on node pool %q)", e.Message, pools[i].Name)})
			}
		}
		return out
	}
	return merge(func(v policy.Validation) []policy.FieldError { return v.Errors }),
		merge(func(v policy.Validation) []policy.FieldError { return v.Trims })
}

func containsError(list []policy.FieldError, e policy.FieldError) bool {
	for _, x := range list {
		if x == e {
			return true
		}
	}
	return false
}

// denial is the status of a denied pod in the API server's own form for
// invalid objects (422, reason Invalid, one cause per field error), so that
// kubectl prints "The Pod "x" is invalid:" and one line per violation. The
// API server prefixes the message with the webhook's name.
func denial(kind, group, name string, errs []policy.FieldError) *metav1.Status {
	causes := make([]metav1.StatusCause, len(errs))
	texts := make([]string, len(errs))
	for i, e := range errs {
		causes[i] = metav1.StatusCause{Type: causeType(e.Message), Message: e.Message, Field: e.Field}
		texts[i] = e.Error()
	}
	msg := texts[0]
	if len(texts) > 1 {
		msg = "[" + strings.Join(texts, ", ") + "]"
	}
	what := kind
	if group != "" {
		what += "." + group
	}
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    422,
		Reason:  metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %q is invalid: %s", what, name, msg),
		Details: &metav1.StatusDetails{Name: name, Group: group, Kind: kind, Causes: causes},
	}
}

// causeType maps the API server's message prefixes (field.ErrorType) to the
// cause type it would report.
func causeType(msg string) metav1.CauseType {
	for _, t := range []struct {
		prefix string
		typ    metav1.CauseType
	}{
		{"Unsupported value", metav1.CauseTypeFieldValueNotSupported},
		{"Required value", metav1.CauseTypeFieldValueRequired},
		{"Too long", metav1.CauseTypeTooLong},
		{"Forbidden", metav1.CauseTypeForbidden},
		{"Duplicate value", metav1.CauseTypeFieldValueDuplicate},
	} {
		if strings.HasPrefix(msg, t.prefix) {
			return t.typ
		}
	}
	return metav1.CauseTypeFieldValueInvalid
}

// quotedList matches the lists the engine quotes: ["a","b"].
var quotedList = regexp.MustCompile(`\[("[^"\]]*"(,"[^"\]]*")*)?\]`)

// warning renders a trim as one line. A warning longer than
// shortWarningRunes has the echo of the pod's own list (the first list) cut
// to three entries; one still longer than maxWarningRunes has every list cut
// to one entry, and is then cut at maxWarningRunes.
func warning(e policy.FieldError) string {
	full := strings.Join(strings.Fields(WarningPrefix+e.Error()), " ")
	render := func(keepFirst, keepOthers int) string {
		n := 0
		return quotedList.ReplaceAllStringFunc(full, func(list string) string {
			if n++; n == 1 {
				return shortenList(list, keepFirst)
			}
			return shortenList(list, keepOthers)
		})
	}
	w := full
	for _, keep := range [][2]int{{3, -1}, {1, 1}} {
		if utf8.RuneCountInString(w) <= shortWarningRunes {
			break
		}
		if keep[0] == 1 && utf8.RuneCountInString(w) <= maxWarningRunes {
			break
		}
		w = render(keep[0], keep[1])
	}
	return capWarning(w)
}

// capWarning cuts w to maxWarningRunes, ending it with "...".
func capWarning(w string) string {
	if r := []rune(w); len(r) > maxWarningRunes {
		return string(r[:maxWarningRunes-3]) + "..."
	}
	return w
}

// shortenList keeps the first keep entries of a quoted list of more than
// keep+1 entries; a negative keep keeps them all.
func shortenList(list string, keep int) string {
	if keep < 0 {
		return list
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(list, "["), "]")
	if inner == "" {
		return list
	}
	items := strings.Split(inner, ",")
	if len(items) <= keep+1 {
		return list
	}
	return fmt.Sprintf("[%s,... %d more]", strings.Join(items[:keep], ","), len(items)-keep)
}

func oneLine(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ok, off := kjson.SyntaxErrorOffset(e); ok {
			return fmt.Sprintf("%s (at byte %d)", e.Error(), off)
		}
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
