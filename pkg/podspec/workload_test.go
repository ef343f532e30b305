package podspec

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func TestTemplates(t *testing.T) {
	spec := `{"dnsPolicy":"None","dnsConfig":{"nameservers":["10.0.0.1"],"searches":["a.example"]}}`
	tmpl := `{"metadata":{"labels":{"app":"x"}},"spec":` + spec + `}`
	meta := `"metadata":{"name":"w","namespace":"team"}`
	cases := []struct {
		kind, obj, path, name, ns, err string
	}{
		{kind: "Pod", obj: `{` + `"metadata":{"name":"p","namespace":"team"},"spec":` + spec + `}`, path: "<nil>", name: "p", ns: "team"},
		{kind: "Deployment", obj: `{` + meta + `,"spec":{"replicas":2,"template":` + tmpl + `}}`, path: "spec.template", name: "w", ns: "team"},
		{kind: "ReplicaSet", obj: `{` + meta + `,"spec":{"template":` + tmpl + `}}`, path: "spec.template", name: "w", ns: "team"},
		{kind: "StatefulSet", obj: `{` + meta + `,"spec":{"template":` + tmpl + `}}`, path: "spec.template", name: "w", ns: "team"},
		{kind: "DaemonSet", obj: `{` + meta + `,"spec":{"template":` + tmpl + `}}`, path: "spec.template", name: "w", ns: "team"},
		{kind: "Job", obj: `{` + meta + `,"spec":{"template":` + tmpl + `}}`, path: "spec.template", name: "w", ns: "team"},
		{kind: "ReplicationController", obj: `{` + meta + `,"spec":{"template":` + tmpl + `}}`, path: "spec.template", name: "w", ns: "team"},
		{kind: "CronJob", obj: `{` + meta + `,"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":` + tmpl + `}}}}`,
			path: "spec.jobTemplate.spec.template", name: "w", ns: "team"},
		{kind: "PodTemplate", obj: `{` + meta + `,"template":` + tmpl + `}`, path: "template", name: "w", ns: "team"},
		{kind: "Service", obj: `{}`, err: `kind "Service" has no pod template`},
		{kind: "Deployment", obj: `{` + meta + `,"spec":{}}`, err: "Deployment: spec.template: Required value"},
		{kind: "CronJob", obj: `{` + meta + `,"spec":{"jobTemplate":null}}`, err: "CronJob: spec.jobTemplate: Required value"},
		{kind: "Deployment", obj: `{` + meta + `,"spec":{"template":{"spec":{"dnsPolicy":3}}}}`, err: "Deployment spec.template: json: cannot unmarshal number"},
		{kind: "Deployment", obj: `[]`, err: "Deployment: json: cannot unmarshal array"},
	}
	for _, tc := range cases {
		t.Run(tc.kind+"/"+tc.path+tc.err, func(t *testing.T) {
			got, err := Templates(tc.kind, []byte(tc.obj))
			if !testkit.WantErr(t, err, tc.err) {
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d templates", len(got))
			}
			g := got[0]
			if p := g.Path.String(); p != tc.path {
				t.Errorf("path %q, want %q", p, tc.path)
			}
			if g.Fields.Metadata.Name != tc.name || g.Fields.Metadata.Namespace != tc.ns {
				t.Errorf("name %q namespace %q", g.Fields.Metadata.Name, g.Fields.Metadata.Namespace)
			}
			sp := g.Fields.Spec
			if sp.DNSPolicy != corev1.DNSNone || sp.DNSConfig == nil || sp.DNSConfig.Searches[0] != "a.example" {
				t.Errorf("spec %+v", sp)
			}
		})
	}
	if !HasTemplate("CronJob") || HasTemplate("Service") || len(TemplateKinds()) != 9 {
		t.Errorf("HasTemplate/TemplateKinds disagree with the table: %v", TemplateKinds())
	}
}
