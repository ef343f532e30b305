package lint

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// found is what a finder test compares of a finding.
type foundAt struct {
	Rule, Field string
	Line        int
}

func lintFound(t *testing.T, f Finder, check Check, in string) ([]foundAt, []KindCount) {
	t.Helper()
	targets, skipped := f.Find(parse(t, in))
	rep, err := Run(context.Background(), targets, check)
	if err != nil {
		t.Fatal(err)
	}
	var got []foundAt
	for _, r := range rep.Results {
		for _, f := range r.Findings {
			got = append(got, foundAt{f.Rule, f.Field, f.Line})
		}
	}
	return got, skipped
}

// kubeletCheck is validate's check without --strict: the API server's,
// and kubelet's warnings for a node with an empty resolver file.
func kubeletCheck(t *testing.T) Check {
	t.Helper()
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	return WithKubelet(APICheck, eng, policy.Host{}, false)
}

// TestFinderKinds: the templates of workload kinds outside Kubernetes
// are found at their paths, each finding at its full field path and line;
// other kinds are skipped by name.
func TestFinderKinds(t *testing.T) {
	extra, err := ParseTemplatePath("Thing.example.com=spec.jobs[*].pod")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in string
		want     []foundAt
		skipped  []KindCount
	}{
		{"Argo Workflow: spec is a pod spec", "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {generateName: hello-}\nspec:\n  hostNetwork: true\n  dnsConfig:\n    options:\n    - {name: ndots, value: 2}\n",
			[]foundAt{{RuleAPI, "spec.dnsConfig.options[0].value", 8}}, []KindCount{}},
		{"Argo CronWorkflow", "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata: {name: c}\nspec:\n  workflowSpec:\n    hostNetwork: true\n",
			[]foundAt{{RuleWarning, "spec.workflowSpec.dnsPolicy", 6}}, []KindCount{}},
		{"Tekton TaskRun", "apiVersion: tekton.dev/v1\nkind: TaskRun\nmetadata: {name: r}\nspec:\n  podTemplate:\n    dnsPolicy: None\n",
			[]foundAt{{RuleAPI, "spec.podTemplate.dnsConfig", 5}}, []KindCount{}},
		{"Tekton PipelineRun v1 and per task", "apiVersion: tekton.dev/v1\nkind: PipelineRun\nmetadata: {name: r}\nspec:\n  taskRunTemplate:\n    podTemplate: {hostNetwork: true, dnsPolicy: ClusterFirst}\n  taskRunSpecs:\n  - pipelineTaskName: a\n  - pipelineTaskName: b\n    podTemplate:\n      dnsConfig: {searches: [Bad_Domain]}\n",
			[]foundAt{{RuleWarning, "spec.taskRunTemplate.podTemplate.dnsPolicy", 6}, {RuleAPI, "spec.taskRunSpecs[1].podTemplate.dnsConfig.searches[0]", 11}}, []KindCount{}},
		{"Knative Service: a template with metadata", "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: s, namespace: web}\nspec:\n  template:\n    metadata: {name: Bad_Rev}\n    spec:\n      containers: [{image: x}]\n",
			[]foundAt{{RuleAPI, "spec.template.metadata.name", 6}}, []KindCount{}},
		{"a kind named by --pod-template", "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\nspec:\n  jobs:\n  - pod: {spec: {dnsPolicy: Default}}\n  - pod: {spec: {hostNetwork: true}}\n",
			[]foundAt{{RuleWarning, "spec.jobs[1].pod.spec.dnsPolicy", 7}}, []KindCount{}},
		{"a path through a string", "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\nspec:\n  jobs: many\n",
			[]foundAt{{RuleAPI, "spec.jobs", 5}}, []KindCount{}},
		{"a Job of another group is not a batch Job", "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: v}\nspec: {tasks: []}\n---\napiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\n",
			nil, []KindCount{{"ConfigMap", 2}, {"Job.batch.volcano.sh", 1}}},
		{"a Workflow of another group", "apiVersion: example.org/v1\nkind: Workflow\nmetadata: {name: w}\nspec: {hostNetwork: true}\n",
			nil, []KindCount{{"Workflow.example.org", 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := lintFound(t, NewFinder([]TemplatePath{extra}), kubeletCheck(t), tc.in)
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(skipped, tc.skipped) {
				t.Errorf("got  %+v, skipped %+v\nwant %+v, skipped %+v", got, skipped, tc.want, tc.skipped)
			}
		})
	}
}

// TestFinderProblems: an object the API server refuses whole is a
// finding at the line of its field, never a failed read.
func TestFinderProblems(t *testing.T) {
	tests := []struct {
		name, in string
		want     []foundAt
	}{
		{"integer option value (helm --set)", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      dnsConfig:\n        options:\n        - name: ndots\n          value: 2\n",
			[]foundAt{{RuleAPI, "spec.template.spec.dnsConfig.options[0].value", 10}}},
		{"boolean as a string in a List item", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: DaemonSet\n  metadata: {name: d}\n  spec:\n    template:\n      spec:\n        hostNetwork: \"true\"\n",
			[]foundAt{{RuleAPI, "items[0].spec.template.spec.hostNetwork", 10}}},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", []foundAt{{RuleAPI, "kind", 1}}},
		{"no template", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n", []foundAt{{RuleAPI, "spec.template", 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := lintFound(t, NewFinder(nil), APICheck, tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestWithKubelet: render's warnings are validate's, at the field they
// are about; a defaulted dnsPolicy is found at hostNetwork's line; with
// trims (--strict) kubelet's trimming is NodeCheck's error, not a warning.
func TestWithKubelet(t *testing.T) {
	ds := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      hostNetwork: true\n%s      containers: [{name: c, image: x}]\n"
	tests := []struct {
		name, in string
		want     []foundAt
	}{
		{"written ClusterFirst", strings.Replace(ds, "%s", "      dnsPolicy: ClusterFirst\n", 1), []foundAt{{RuleWarning, "spec.template.spec.dnsPolicy", 8}}},
		{"defaulted ClusterFirst", strings.Replace(ds, "%s", "", 1), []foundAt{{RuleWarning, "spec.template.spec.dnsPolicy", 7}}},
		{"ClusterFirstWithHostNet", strings.Replace(ds, "%s", "      dnsPolicy: ClusterFirstWithHostNet\n", 1), nil},
		{"Default", strings.Replace(ds, "%s", "      dnsPolicy: Default\n", 1), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := lintFound(t, NewFinder(nil), kubeletCheck(t), tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	eng, err := policy.New(policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	host := policy.Host{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  dnsPolicy: Default\n  dnsConfig: {nameservers: [10.0.0.1]}\n"
	for _, tc := range []struct {
		name  string
		check Check
		want  []foundAt
	}{
		{"not strict: a warning", WithKubelet(APICheck, eng, host, false), []foundAt{{RuleWarning, "spec.dnsConfig.nameservers", 6}}},
		{"strict: the trim alone", WithKubelet(NodeCheck(eng, host), eng, host, true), []foundAt{{RuleTrim, "spec.dnsConfig.nameservers", 6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := lintFound(t, NewFinder(nil), tc.check, pod)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseTemplatePath(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"Workflow.argoproj.io=spec", "Workflow.argoproj.io=spec", ""},
		{"Thing=spec.jobs[].pod", "Thing=spec.jobs[].pod", ""},
		{"Thing=spec.jobs[2].pods[*]", "Thing=spec.jobs[2].pods[*]", ""},
		{"Thing", "", "want KIND[.GROUP]=PATH"},
		{"=spec", "", "want KIND[.GROUP]=PATH"},
		{"Thing=spec..x", "", "an empty key"},
		{"Thing=spec.jobs[x]", "", "is not a list index"},
		{"Thing=spec.jobs]", "", ""},
		{"apps/v1=spec", "", "with a kind such as Workflow"},
	} {
		p, err := ParseTemplatePath(tc.in)
		switch {
		case tc.err == "" && tc.want == "":
			// accepted or not, it must not panic
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
		case err != nil || p.String() != tc.want:
			t.Errorf("%q: %v, %v; want %q", tc.in, p, err, tc.want)
		}
	}
}
