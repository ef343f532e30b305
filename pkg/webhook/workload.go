package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
)

// workloadGroups are the API group and version of each workload kind the
// webhook reviews: the kinds podspec.Templates reads, Pod aside.
var workloadGroups = map[string]string{
	"Deployment":            "apps/v1",
	"ReplicaSet":            "apps/v1",
	"StatefulSet":           "apps/v1",
	"DaemonSet":             "apps/v1",
	"Job":                   "batch/v1",
	"CronJob":               "batch/v1",
	"PodTemplate":           "v1",
	"ReplicationController": "v1",
}

// workloadKind reports a request for a workload object itself (not a
// subresource such as scale or status).
func workloadKind(req *admissionv1.AdmissionRequest) bool {
	gv, ok := workloadGroups[req.Kind.Kind]
	if !ok || req.SubResource != "" {
		return false
	}
	want := req.Kind.Version
	if req.Kind.Group != "" {
		want = req.Kind.Group + "/" + want
	}
	return gv == want
}

// reviewWorkload checks the pod template of a workload on CREATE and
// UPDATE, with the API server's field paths
// (spec.template.spec.dnsConfig.searches[32]). An UPDATE that leaves the
// template's DNS fields as they were is never denied (its problems are
// warnings): the object was admitted with them, and a rule added since, or
// a node setting changed since, must not block an unrelated change such as
// a scale or an image bump.
func (r *Reviewer) reviewWorkload(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) (*admissionv1.AdmissionResponse, Outcome, []Violation, error) {
	kind := req.Kind.Kind
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		resp.Warnings = []string{fmt.Sprintf("%soperation %s on a %s is not checked, only CREATE and UPDATE; the webhook's rules should select only those", WarningPrefix, req.Operation, kind)}
		return resp, OutcomeSkipped, nil, nil
	}
	if len(req.Object.Raw) == 0 {
		return nil, "", nil, badRequest("request.object is empty for a %s %s", kind, req.Operation)
	}
	tmpls, err := podspec.Templates(kind, req.Object.Raw)
	if err != nil {
		return nil, "", nil, badRequest("request.object: %s", oneLine(err))
	}
	var old []podspec.Template
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old, _ = podspec.Templates(kind, req.OldObject.Raw) // unreadable: treated as changed
	}
	var (
		vs       []Violation
		warnings []string
		name     = req.Name
	)
	for i, t := range tmpls {
		if name == "" {
			name = t.Fields.Metadata.Name
		}
		pod := t.Fields.Pod()
		if pod.Namespace == "" {
			pod.Namespace = req.Namespace
		}
		pod.Spec.NodeSelector = t.NodeSelector
		podspec.Default(pod)
		unchanged := i < len(old) && sameDNS(old[i], t)
		v, w := r.reviewPod(pod, t.Path, unchanged)
		if unchanged && len(v) > 0 {
			warnings = append(warnings, fmt.Sprintf("%sthe DNS fields of %s are unchanged by this update, so their problems below are warnings, not denials; fix them before the next change to them", WarningPrefix, t.Path))
		}
		vs = append(vs, v...)
		warnings = append(warnings, w...)
	}
	group := req.Kind.Group
	return r.respond(resp, kind, group, name, vs, warnings)
}

// sameDNS reports whether two templates have the same DNS-relevant fields.
func sameDNS(a, b podspec.Template) bool {
	key := func(t podspec.Template) []byte {
		m := t.Fields.Metadata
		b, _ := json.Marshal(struct {
			Spec         podspec.Spec
			Annotations  map[string]string
			NodeSelector map[string]string
		}{t.Fields.Spec, m.Annotations, t.NodeSelector})
		return b
	}
	return bytes.Equal(key(a), key(b))
}
