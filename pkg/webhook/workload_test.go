package webhook

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// workloadJSON is a workload of kind with the pod template spec given,
// at the kind's template path.
func workloadJSON(kind, spec string) []byte {
	tmpl := `{"metadata":{"labels":{"app":"web"}},"spec":` + spec + `}`
	meta := `"metadata":{"name":"web","namespace":"shop"}`
	switch kind {
	case "CronJob":
		return []byte(`{` + meta + `,"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":` + tmpl + `}}}}`)
	case "PodTemplate":
		return []byte(`{` + meta + `,"template":` + tmpl + `}`)
	}
	return []byte(`{` + meta + `,"spec":{"template":` + tmpl + `}}`)
}

func workloadRequest(kind, group string, op admissionv1.Operation, obj, old []byte) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{UID: "u1", Name: "web", Namespace: "shop", Operation: op,
		Kind:   metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind},
		Object: runtime.RawExtension{Raw: obj}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: old}
	}
	return req
}

// badSearches has 33 search domains of its own: the API server's limit is
// 32, so it is denied on the full template path.
var badSearches = func() string {
	var s []string
	for i := range 33 {
		s = append(s, fmt.Sprintf(`"s%d.example"`, i))
	}
	return `{"dnsPolicy":"None","dnsConfig":{"nameservers":["10.0.0.1"],"searches":[` + strings.Join(s, ",") + `]}}`
}()

const (
	goodSpec = `{"dnsPolicy":"None","dnsConfig":{"nameservers":["10.0.0.1"],"searches":["a.example"]}}`
	// fourServers: the cluster DNS and three of its own, which kubelet
	// trims to three (ClusterFirst, the default): a warning.
	fourServers = `{"dnsConfig":{"nameservers":["10.0.0.1","10.0.0.2","10.0.0.3"]}}`
)

func TestWorkloadReview(t *testing.T) {
	r := testReviewer(t)
	kinds := []struct{ kind, group, path string }{
		{"Deployment", "apps", "spec.template.spec"},
		{"ReplicaSet", "apps", "spec.template.spec"},
		{"StatefulSet", "apps", "spec.template.spec"},
		{"DaemonSet", "apps", "spec.template.spec"},
		{"Job", "batch", "spec.template.spec"},
		{"CronJob", "batch", "spec.jobTemplate.spec.template.spec"},
		{"PodTemplate", "", "template.spec"},
		{"ReplicationController", "", "spec.template.spec"},
	}
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			what := k.kind
			if k.group != "" {
				what += "." + k.group
			}
			for _, tc := range []struct {
				name     string
				op       admissionv1.Operation
				obj, old string
				outcome  Outcome
				want     string // in the denial message or a warning
			}{
				{"bad create", admissionv1.Create, badSearches, "", OutcomeDenied,
					what + ` "web" is invalid: ` + k.path + ".dnsConfig.searches"},
				{"good create", admissionv1.Create, goodSpec, "", OutcomeAllowed, ""},
				{"trimmed create", admissionv1.Create, fourServers, "", OutcomeWarned, k.path + ".dnsConfig.nameservers"},
				{"update making it bad", admissionv1.Update, badSearches, goodSpec, OutcomeDenied, k.path + ".dnsConfig.searches"},
				{"update fixing it", admissionv1.Update, goodSpec, badSearches, OutcomeAllowed, ""},
				{"update leaving it bad", admissionv1.Update, badSearches, badSearches, OutcomeWarned,
					"the DNS fields of " + strings.TrimSuffix(k.path, ".spec") + " are unchanged by this update"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					var old []byte
					if tc.old != "" {
						old = workloadJSON(k.kind, tc.old)
					}
					resp, outcome, _, err := r.Review(workloadRequest(k.kind, k.group, tc.op, workloadJSON(k.kind, tc.obj), old))
					if err != nil {
						t.Fatal(err)
					}
					if outcome != tc.outcome || resp.Allowed != (tc.outcome != OutcomeDenied) {
						t.Fatalf("outcome %s allowed %v, want %s; response %+v", outcome, resp.Allowed, tc.outcome, resp)
					}
					text := strings.Join(resp.Warnings, "\n")
					if resp.Result != nil {
						text += resp.Result.Message
						for _, c := range resp.Result.Details.Causes {
							if !strings.HasPrefix(c.Field, k.path+".") {
								t.Errorf("cause field %q is not under %s", c.Field, k.path)
							}
						}
					}
					if !strings.Contains(text, tc.want) {
						t.Errorf("response %q lacks %q", text, tc.want)
					}
				})
			}
		})
	}
}

// TestWorkloadReviewBadRequests: a workload object without its template,
// or with a field of the wrong type, is a bad request; a DELETE and a
// workload of another API version are skipped.
func TestWorkloadReviewBadRequests(t *testing.T) {
	r := testReviewer(t)
	for _, tc := range []struct {
		name string
		req  *admissionv1.AdmissionRequest
		err  string
	}{
		{"no template", workloadRequest("Deployment", "apps", admissionv1.Create, []byte(`{"metadata":{"name":"web"},"spec":{}}`), nil),
			"spec.template: Required value"},
		{"wrong type", workloadRequest("Job", "batch", admissionv1.Create, []byte(`{"spec":{"template":{"spec":{"dnsConfig":[]}}}}`), nil),
			"Job spec.template"},
		{"repeated options", workloadRequest("Deployment", "apps", admissionv1.Create, []byte(`{"spec":{"template":{"spec":{"dnsConfig":{"options":[{}],"options":[]}}}}}`), nil),
			"request.object: Deployment spec.template: spec.dnsConfig.options: duplicate key"},
		{"repeated template", workloadRequest("StatefulSet", "apps", admissionv1.Create, []byte(`{"spec":{"template":{},"template":{}}}`), nil),
			"request.object: StatefulSet spec: template: duplicate key"},
		{"empty", workloadRequest("DaemonSet", "apps", admissionv1.Create, nil, nil), "request.object is empty for a DaemonSet CREATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := r.Review(tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
	for _, req := range []*admissionv1.AdmissionRequest{
		workloadRequest("Deployment", "apps", admissionv1.Delete, nil, nil),
		workloadRequest("Deployment", "extensions", admissionv1.Create, workloadJSON("Deployment", badSearches), nil),
	} {
		resp, outcome, _, err := r.Review(req)
		if err != nil || outcome != OutcomeSkipped || !resp.Allowed {
			t.Errorf("%s %s: outcome %s err %v, want skipped", req.Operation, req.Kind, outcome, err)
		}
	}
}

// TestWorkloadPolicyWarning: the cluster policy warning shows for a
// workload's template as for a pod: a Deployment whose template did not
// choose is told what its pods get.
func TestWorkloadPolicyWarning(t *testing.T) {
	two := 2
	node := testNode
	node.DefaultPolicy, node.Ndots = policy.ClusterFirstWithAutopath, &two
	r := &Reviewer{Default: testPool(t, "", nil, node, testHost), ClusterPolicy: true}
	resp, outcome, _, err := r.Review(workloadRequest("Deployment", "apps", admissionv1.Create, workloadJSON("Deployment", `{}`), nil))
	if err != nil {
		t.Fatal(err)
	}
	if outcome != OutcomeWarned || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "cluster DNS policy: this pod gets ClusterFirstWithAutopath") {
		t.Errorf("outcome %s, warnings %q", outcome, resp.Warnings)
	}
	resp, outcome, _, err = r.Review(workloadRequest("Deployment", "apps", admissionv1.Create,
		workloadJSON("Deployment", `{"dnsPolicy":"Default"}`), nil))
	if err != nil || outcome != OutcomeAllowed || len(resp.Warnings) != 0 {
		t.Errorf("a template that chose: outcome %s, warnings %q, err %v", outcome, resp.Warnings, err)
	}
}

// TestWorkloadDenyTrims: with trims: deny a template whose own nameservers
// kubelet would drop is denied on the template's path, as a pod is; an
// update keeping it only warns.
func TestWorkloadDenyTrims(t *testing.T) {
	r := &Reviewer{Default: testReviewer(t).Default, DenyTrims: true}
	resp, outcome, _, err := r.Review(workloadRequest("StatefulSet", "apps", admissionv1.Create, workloadJSON("StatefulSet", fourServers), nil))
	if err != nil {
		t.Fatal(err)
	}
	if outcome != OutcomeDenied || resp.Result == nil || !strings.Contains(resp.Result.Message, `StatefulSet.apps "web" is invalid: spec.template.spec.dnsConfig.nameservers`) {
		t.Errorf("outcome %s, result %+v", outcome, resp.Result)
	}
	_, outcome, _, err = r.Review(workloadRequest("StatefulSet", "apps", admissionv1.Update,
		workloadJSON("StatefulSet", fourServers), workloadJSON("StatefulSet", fourServers)))
	if err != nil || outcome != OutcomeWarned {
		t.Errorf("update keeping it: outcome %s, err %v", outcome, err)
	}
}

// TestSkipWorkloads: workloads: skip allows a workload the checks would
// deny, with no warning, while a bare Pod is still checked.
func TestSkipWorkloads(t *testing.T) {
	r := &Reviewer{Default: testReviewer(t).Default, SkipWorkloads: true}
	resp, outcome, vs, err := r.Review(workloadRequest("Deployment", "apps", admissionv1.Create, workloadJSON("Deployment", badSearches), nil))
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Allowed || outcome != OutcomeSkipped || len(vs) != 0 || len(resp.Warnings) != 0 {
		t.Errorf("skipped workload: allowed %v, outcome %s, violations %v, warnings %q", resp.Allowed, outcome, vs, resp.Warnings)
	}
	pod := &admissionv1.AdmissionRequest{UID: "u2", Name: "web", Namespace: "shop", Operation: admissionv1.Create,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"web","namespace":"shop"},"spec":` + badSearches + `}`)}}
	resp, outcome, _, err = r.Review(pod)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || outcome != OutcomeDenied {
		t.Errorf("pod with skipped workloads: allowed %v, outcome %s", resp.Allowed, outcome)
	}
}

// FuzzWorkloadReview (issue 55): any object JSON as each workload kind,
// created or updated from any old object: a response with the request's
// UID (allowed, or denied with a status) or a reason for a 400, never a
// panic.
func FuzzWorkloadReview(f *testing.F) {
	kinds := []struct{ kind, group string }{
		{"Deployment", "apps"}, {"ReplicaSet", "apps"}, {"StatefulSet", "apps"}, {"DaemonSet", "apps"},
		{"Job", "batch"}, {"CronJob", "batch"}, {"PodTemplate", ""}, {"ReplicationController", ""},
	}
	for i, k := range kinds {
		f.Add(uint8(i), true, workloadJSON(k.kind, goodSpec), []byte(nil))
		f.Add(uint8(i), false, workloadJSON(k.kind, badSearches), workloadJSON(k.kind, badSearches))
		f.Add(uint8(i), false, workloadJSON(k.kind, fourServers), workloadJSON(k.kind, goodSpec))
	}
	f.Add(uint8(5), true, []byte(`{"spec":{"jobTemplate":null}}`), []byte(nil))
	f.Add(uint8(0), true, []byte(`{"spec":{"template":{"spec":{"dnsConfig":{"options":[{},{"name":"ndots","value":"x"}]}}}}}`), []byte(nil))
	r := testReviewer(f)
	f.Fuzz(func(t *testing.T, k uint8, create bool, obj, old []byte) {
		kind := kinds[int(k)%len(kinds)]
		op := admissionv1.Update
		if create {
			op, old = admissionv1.Create, nil
		}
		req := workloadRequest(kind.kind, kind.group, op, obj, old)
		resp, outcome, _, err := r.Review(req)
		if err != nil {
			var bad *BadRequestError
			if !errors.As(err, &bad) || bad.Reason == "" {
				t.Fatalf("error %v is not a reason for a 400", err)
			}
			return
		}
		if resp == nil || resp.UID != req.UID || outcome == "" || resp.Allowed == (resp.Result != nil) {
			t.Fatalf("response %+v, outcome %q", resp, outcome)
		}
	})
}
