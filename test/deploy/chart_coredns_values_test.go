package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Tests of the chart's pod and metadata values, the keys it shares with
// coredns/helm (charts/dnsconfigurer/README.md, "Values against
// coredns/helm").

// marker is a want that is not a value: the field (or object) is not
// rendered, or is rendered with any value.
type marker string

const (
	absent  marker = "absent"
	present marker = "present"
)

// at is one field of a rendered object, at path (fieldPath's syntax); the
// empty path is the object itself.
type at struct {
	obj  objectKey
	path string
	want any
}

// fieldPath reads path in o: names separated by dots, [i] for a list item
// and ["key"] for a key with dots or slashes. ok is false when it is not
// there.
func fieldPath(o any, path string) (v any, ok bool) {
	v = o
	for rest := path; rest != ""; {
		var key string
		switch {
		case strings.HasPrefix(rest, `["`):
			end := strings.Index(rest, `"]`)
			key, rest = rest[2:end], rest[end+2:]
		case strings.HasPrefix(rest, "["):
			end := strings.Index(rest, "]")
			i, err := strconv.Atoi(rest[1:end])
			if err != nil {
				panic("bad path " + path)
			}
			rest = rest[end+1:]
			list, isList := v.([]any)
			if !isList || i >= len(list) {
				return nil, false
			}
			v = list[i]
			rest = strings.TrimPrefix(rest, ".")
			continue
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			key, rest = rest[:end], rest[end:]
		}
		rest = strings.TrimPrefix(rest, ".")
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// helmFlags turns "k=v" into --set, "json:k=v" into --set-json and
// "string:k=v" into --set-string.
func helmFlags(values []string) []string {
	var out []string
	for _, v := range values {
		switch {
		case strings.HasPrefix(v, "json:"):
			out = append(out, "--set-json", strings.TrimPrefix(v, "json:"))
		case strings.HasPrefix(v, "string:"):
			out = append(out, "--set-string", strings.TrimPrefix(v, "string:"))
		default:
			out = append(out, "--set", v)
		}
	}
	return out
}

// jsonEqual compares a rendered value with a want written in Go.
func jsonEqual(got, want any) bool {
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	if err1 != nil || err2 != nil {
		return false
	}
	var gv, wv any
	_ = json.Unmarshal(g, &gv)
	_ = json.Unmarshal(w, &wv)
	return reflect.DeepEqual(gv, wv)
}

// checkAt reports each want of ats that objs does not meet.
func checkAt(t *testing.T, objs map[objectKey]map[string]any, ats []at) {
	t.Helper()
	for _, a := range ats {
		o, ok := objs[a.obj]
		if !ok {
			if a.want != absent {
				t.Errorf("%s: not rendered", a.obj)
			}
			continue
		}
		if a.path == "" {
			if a.want == absent {
				t.Errorf("%s: rendered", a.obj)
			}
			continue
		}
		got, ok := fieldPath(o, a.path)
		switch {
		case a.want == absent:
			if ok {
				t.Errorf("%s %s: %v, want none", a.obj, a.path, got)
			}
		case !ok:
			t.Errorf("%s %s: not rendered, want %v", a.obj, a.path, a.want)
		case a.want == present:
		case !jsonEqual(got, a.want):
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(a.want)
			t.Errorf("%s %s:\n got %s\nwant %s", a.obj, a.path, gj, wj)
		}
	}
}

// The objects the tests look at.
var (
	cDep      = objectKey{"Deployment", "dnsconfigurer", "dnsconfigurer-dns"}
	cDepRC    = objectKey{"Deployment", "kube-system", "dnsconfigurer-dns"}
	cSvc      = objectKey{"Service", "dnsconfigurer", "dnsconfigurer-dns"}
	cUpstream = objectKey{"Service", "dnsconfigurer", "dnsconfigurer-dns-upstream"}
	cKubeDNS  = objectKey{"Service", "kube-system", "kube-dns"}
	cCM       = objectKey{"ConfigMap", "dnsconfigurer", "dnsconfigurer-dns"}
	cSA       = objectKey{"ServiceAccount", "dnsconfigurer", "dnsconfigurer-dns"}
	cCR       = objectKey{"ClusterRole", "", "dnsconfigurer-dns"}
	cCRB      = objectKey{"ClusterRoleBinding", "", "dnsconfigurer-dns"}
	cPDB      = objectKey{"PodDisruptionBudget", "dnsconfigurer", "dnsconfigurer-dns"}
	cHPA      = objectKey{"HorizontalPodAutoscaler", "dnsconfigurer", "dnsconfigurer-dns"}
	cSM       = objectKey{"ServiceMonitor", "dnsconfigurer", "dnsconfigurer-dns"}
	cSMRC     = objectKey{"ServiceMonitor", "kube-system", "dnsconfigurer-dns"}
	cCPA      = objectKey{"Deployment", "dnsconfigurer", "dnsconfigurer-dns-autoscaler"}
	cCPARC    = objectKey{"Deployment", "kube-system", "dnsconfigurer-dns-autoscaler"}
	cCPACM    = objectKey{"ConfigMap", "dnsconfigurer", "dnsconfigurer-dns-autoscaler"}
	cCPASA    = objectKey{"ServiceAccount", "dnsconfigurer", "dnsconfigurer-dns-autoscaler"}
	cCPACR    = objectKey{"ClusterRole", "", "dnsconfigurer-dns-autoscaler"}
	cCPACRB   = objectKey{"ClusterRoleBinding", "", "dnsconfigurer-dns-autoscaler"}
	cCPARole  = objectKey{"Role", "dnsconfigurer", "dnsconfigurer-dns-autoscaler"}
	cCPARB    = objectKey{"RoleBinding", "dnsconfigurer", "dnsconfigurer-dns-autoscaler"}
	cNL       = objectKey{"DaemonSet", "dnsconfigurer-node", "dnsconfigurer-node-local-dns"}
	cShim     = objectKey{"DaemonSet", "dnsconfigurer-node", "dnsconfigurer-shim"}
	cShimCR   = objectKey{"ClusterRole", "", "dnsconfigurer-shim"}
	cShimCRB  = objectKey{"ClusterRoleBinding", "", "dnsconfigurer-shim"}
	cNRI      = objectKey{"DaemonSet", "dnsconfigurer-node", "dnsconfigurer-nri"}
	cNRICR    = objectKey{"ClusterRole", "", "dnsconfigurer-nri"}
	cWH       = objectKey{"Deployment", "dnsconfigurer", "dnsconfigurer-webhook"}
	cWHPDB    = objectKey{"PodDisruptionBudget", "dnsconfigurer", "dnsconfigurer-webhook"}
	cTestPod  = objectKey{"Pod", "kube-system", "dnsconfigurer-resolve"}
)

// Paths into a workload: its pod's metadata and spec, its first container.
const (
	podMeta = "spec.template.metadata."
	pod     = "spec.template.spec."
	ctr     = pod + "containers[0]."
)

// dnsPodLabels are the cluster DNS pods' own labels (its selector).
var dnsPodLabels = map[string]any{"app.kubernetes.io/component": "dns", "app.kubernetes.io/instance": "dnsconfigurer-dns"}

// TestChartCoreDNSValues: helm template with each pod and metadata value
// set renders what the value says, at the field it names, and leaves the
// chart's own fields alone.
func TestChartCoreDNSValues(t *testing.T) {
	helm := helmBin(t)
	canary := "dnsconfigurer.io/canary"
	for _, tc := range []struct {
		name   string
		values []string
		want   []at
	}{
		{"defaults", nil, []at{
			{cDep, "spec.replicas", 2}, {cDep, pod + "terminationGracePeriodSeconds", absent}, {cDep, pod + "imagePullSecrets", absent},
			{cDep, ctr + "readinessProbe.failureThreshold", absent}, {cDep, ctr + "livenessProbe.successThreshold", absent},
			{cDep, podMeta + "annotations", absent}, {cDep, "metadata.annotations", absent}, {cSvc, "spec.trafficDistribution", absent},
			{cPDB, "spec", map[string]any{"minAvailable": 1, "selector": map[string]any{"matchLabels": dnsPodLabels}}},
			{cHPA, "", absent}, {cCPA, "", absent}, {cCPACM, "", absent}, {cSM, "", absent},
			{cWH, "spec.replicas", 2}, {cWH, pod + "priorityClassName", absent}, {cWH, pod + "tolerations", absent},
			{cNL, pod + "priorityClassName", "system-node-critical"}, {cNL, pod + "affinity", absent},
		}},
		{"replicaCount", []string{"replicaCount=3"}, []at{{cDep, "spec.replicas", 3}}},
		{"resources merge with the default", []string{"resources.requests.cpu=250m", "resources.limits.cpu=1"}, []at{
			{cDep, ctr + "resources", map[string]any{"limits": map[string]any{"cpu": 1, "memory": "288Mi"}, "requests": map[string]any{"cpu": "250m", "memory": "72Mi"}}},
		}},
		{"rollingUpdate", []string{"rollingUpdate.maxSurge=25%", "rollingUpdate.maxUnavailable=1"}, []at{
			{cDep, "spec.strategy", map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": 1}}},
		}},
		{"terminationGracePeriodSeconds", []string{"terminationGracePeriodSeconds=60"}, []at{{cDep, pod + "terminationGracePeriodSeconds", 60}}},
		{"podAnnotations and podLabels", []string{`podAnnotations.example\.com/a=x`, "podLabels.team=dns"}, []at{
			{cDep, podMeta + "annotations", map[string]any{"example.com/a": "x"}},
			{cDep, podMeta + "labels", map[string]any{"app.kubernetes.io/component": "dns", "app.kubernetes.io/instance": "dnsconfigurer-dns", "team": "dns"}},
			{cDep, "spec.selector.matchLabels", dnsPodLabels}, {cDep, "metadata.labels.team", absent},
		}},
		{"podLabels cannot change the selector's", []string{`podLabels.app\.kubernetes\.io/component=other`, `customLabels.app\.kubernetes\.io/name=other`}, []at{
			{cDep, podMeta + `labels["app.kubernetes.io/component"]`, "dns"}, {cDep, `metadata.labels["app.kubernetes.io/name"]`, "dnsconfigurer-dns"},
		}},
		{"customLabels and customAnnotations on the cluster DNS's objects", []string{"customLabels.team=dns", "customAnnotations.owner=platform", "hpa.enabled=true", "prometheus.monitor.enabled=true"}, []at{
			{cDep, "metadata.labels.team", "dns"}, {cDep, podMeta + "labels.team", "dns"}, {cSvc, "metadata.labels.team", "dns"}, {cUpstream, "metadata.labels.team", "dns"},
			{cCM, "metadata.labels.team", "dns"}, {cSA, "metadata.labels.team", "dns"}, {cCR, "metadata.labels.team", "dns"}, {cCRB, "metadata.labels.team", "dns"},
			{cPDB, "metadata.labels.team", "dns"}, {cHPA, "metadata.labels.team", "dns"}, {cSM, "metadata.labels.team", "dns"},
			{cDep, "metadata.annotations.owner", "platform"}, {cSvc, "metadata.annotations.owner", "platform"}, {cCM, "metadata.annotations.owner", "platform"},
			{cSA, "metadata.annotations.owner", "platform"}, {cPDB, "metadata.annotations.owner", "platform"}, {cHPA, "metadata.annotations.owner", "platform"},
			{cSM, "metadata.annotations.owner", "platform"}, {cDep, podMeta + "annotations", absent},
			{cWH, "metadata.labels.team", absent}, {cNL, "metadata.labels.team", absent}, {cShim, podMeta + "labels.team", absent},
		}},
		{"customLabels on kube-dns", []string{"placement=replace-coredns", "customLabels.team=dns"}, []at{
			{cKubeDNS, "metadata.labels.team", "dns"}, {cKubeDNS, `metadata.labels["k8s-app"]`, "kube-dns"}, {cDepRC, podMeta + `labels["k8s-app"]`, "kube-dns"},
		}},
		{"priorityClassName", []string{"priorityClassName=dns-critical"}, []at{{cDep, pod + "priorityClassName", "dns-critical"}}},
		{"priorityClassName empty", []string{"priorityClassName="}, []at{{cDep, pod + "priorityClassName", absent}}},
		{"podSecurityContext merges with the default", []string{"podSecurityContext.fsGroup=2000"}, []at{
			{cDep, pod + "securityContext.fsGroup", 2000}, {cDep, pod + "securityContext.runAsUser", 65532},
			{cDep, pod + "securityContext.sysctls", []any{map[string]any{"name": "net.ipv4.ip_unprivileged_port_start", "value": "53"}}},
		}},
		{"securityContext", []string{"securityContext.readOnlyRootFilesystem=false", "securityContext.runAsUser=1000"}, []at{
			{cDep, ctr + "securityContext.readOnlyRootFilesystem", false}, {cDep, ctr + "securityContext.runAsUser", 1000},
			{cDep, ctr + "securityContext.capabilities", map[string]any{"add": []any{"NET_BIND_SERVICE"}, "drop": []any{"ALL"}}},
		}},
		{"livenessProbe", []string{"livenessProbe.initialDelaySeconds=30", "livenessProbe.periodSeconds=15", "livenessProbe.timeoutSeconds=3", "livenessProbe.successThreshold=1", "livenessProbe.failureThreshold=null"}, []at{
			{cDep, ctr + "livenessProbe", map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "metrics"},
				"initialDelaySeconds": 30, "periodSeconds": 15, "timeoutSeconds": 3, "successThreshold": 1}},
		}},
		{"readinessProbe", []string{"readinessProbe.initialDelaySeconds=3", "readinessProbe.periodSeconds=4", "readinessProbe.timeoutSeconds=1", "readinessProbe.failureThreshold=2", "readinessProbe.successThreshold=2"}, []at{
			{cDep, ctr + "readinessProbe", map[string]any{"httpGet": map[string]any{"path": "/readyz", "port": "metrics"},
				"initialDelaySeconds": 3, "periodSeconds": 4, "timeoutSeconds": 1, "failureThreshold": 2, "successThreshold": 2}},
		}},
		{"probes off", []string{"livenessProbe.enabled=false", "readinessProbe.enabled=false"}, []at{
			{cDep, ctr + "livenessProbe", absent}, {cDep, ctr + "readinessProbe", absent},
		}},
		{"affinity merges; null drops a key", []string{`json:affinity.nodeAffinity={"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["dns"]}]}]}}`, "affinity.podAntiAffinity=null"}, []at{
			{cDep, pod + "affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"dns"}}}}}}}}},
		}},
		{"affinity and topologySpreadConstraints hold templates", []string{
			`json:affinity.podAffinity={"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"podAffinityTerm":{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"release":"{{ .Release.Name }}"}}}}]}`,
			`json:topologySpreadConstraints=[{"maxSkew":2,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"release":"{{ .Release.Name }}"}}}]`,
		}, []at{
			{cDep, pod + "affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels.release", "dnsconfigurer"},
			{cDep, pod + "affinity.podAntiAffinity", present},
			{cDep, pod + "topologySpreadConstraints", []any{map[string]any{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"release": "dnsconfigurer"}}}}},
		}},
		{"nodeSelector merges with the default", []string{"nodeSelector.pool=system"}, []at{
			{cDep, pod + "nodeSelector", map[string]any{"kubernetes.io/os": "linux", "pool": "system"}},
		}},
		{"tolerations replace the default", []string{`json:tolerations=[{"key":"dedicated","operator":"Equal","value":"dns","effect":"NoSchedule"}]`}, []at{
			{cDep, pod + "tolerations", []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "dns", "effect": "NoSchedule"}}},
		}},
		{"podDisruptionBudget maxUnavailable", []string{"podDisruptionBudget.minAvailable=null", "podDisruptionBudget.maxUnavailable=1", "podDisruptionBudget.unhealthyPodEvictionPolicy=AlwaysAllow"}, []at{
			{cPDB, "spec", map[string]any{"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow", "selector": map[string]any{"matchLabels": dnsPodLabels}}},
		}},
		{"podDisruptionBudget selector", []string{`json:podDisruptionBudget.selector={"matchLabels":{"app.kubernetes.io/instance":"dnsconfigurer-dns"}}`}, []at{
			{cPDB, "spec.selector", map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/instance": "dnsconfigurer-dns"}}},
		}},
		{"podDisruptionBudget null", []string{"podDisruptionBudget=null"}, []at{{cPDB, "", absent}}},
		{"env", []string{`json:env=[{"name":"GODEBUG","value":"madvdontneed=1"}]`}, []at{
			{cDep, ctr + "env[0].name", "GOMEMLIMIT"}, {cDep, ctr + "env[1]", map[string]any{"name": "GODEBUG", "value": "madvdontneed=1"}},
		}},
		{"extraVolumes and extraVolumeMounts", []string{`json:extraVolumes=[{"name":"hosts","configMap":{"name":"dns-hosts"}}]`, `json:extraVolumeMounts=[{"name":"hosts","mountPath":"/etc/dnsconfigurer/hosts","readOnly":true}]`}, []at{
			{cDep, pod + "volumes[0].name", "config"}, {cDep, pod + "volumes[1]", map[string]any{"name": "hosts", "configMap": map[string]any{"name": "dns-hosts"}}},
			{cDep, ctr + "volumeMounts[0].name", "config"}, {cDep, ctr + "volumeMounts[1]", map[string]any{"name": "hosts", "mountPath": "/etc/dnsconfigurer/hosts", "readOnly": true}},
		}},
		{"extraContainers and initContainers", []string{`json:extraContainers=[{"name":"sidecar","image":"busybox:1.36"}]`, `json:initContainers=[{"name":"init","image":"busybox:1.36"}]`}, []at{
			{cDep, pod + "containers[0].name", "dns"}, {cDep, pod + "containers[1]", map[string]any{"name": "sidecar", "image": "busybox:1.36"}},
			{cDep, pod + "initContainers", []any{map[string]any{"name": "init", "image": "busybox:1.36"}}},
		}},
		{"deployment.annotations", []string{"deployment.annotations.owner=dns"}, []at{
			{cDep, "metadata.annotations", map[string]any{"owner": "dns"}}, {cDep, podMeta + "annotations", absent},
		}},
		{"deployment.dnsPolicy None with dnsConfig", []string{"deployment.dnsPolicy=None", `json:deployment.dnsConfig={"nameservers":["192.0.2.53"],"options":[{"name":"ndots","value":"1"}]}`}, []at{
			{cDep, pod + "dnsPolicy", "None"}, {cDep, pod + "dnsConfig", map[string]any{"nameservers": []any{"192.0.2.53"}, "options": []any{map[string]any{"name": "ndots", "value": "1"}}}},
		}},
		{"service annotations and trafficDistribution", []string{"service.annotations.a=b", "service.trafficDistribution=PreferClose"}, []at{
			{cSvc, "metadata.annotations", map[string]any{"a": "b"}}, {cUpstream, "metadata.annotations", map[string]any{"a": "b"}},
			{cSvc, "spec.trafficDistribution", "PreferClose"}, {cUpstream, "spec.trafficDistribution", "PreferClose"},
		}},
		{"service annotations on kube-dns keep it kept", []string{"placement=replace-coredns", "service.annotations.a=b", `string:service.annotations.prometheus\.io/scrape=false`,
			`service.annotations.helm\.sh/resource-policy=delete`, "service.trafficDistribution=PreferClose"}, []at{
			{cKubeDNS, "metadata.annotations", map[string]any{"a": "b", "helm.sh/resource-policy": "keep", "prometheus.io/port": "9153", "prometheus.io/scrape": "false"}},
			{cKubeDNS, "spec.trafficDistribution", "PreferClose"},
		}},
		{"serviceAccount name and annotations", []string{"serviceAccount.name=dns-sa", `serviceAccount.annotations.example\.com/role=dns`}, []at{
			{objectKey{"ServiceAccount", "dnsconfigurer", "dns-sa"}, `metadata.annotations["example.com/role"]`, "dns"}, {cSA, "", absent},
			{cDep, pod + "serviceAccountName", "dns-sa"}, {cCRB, "subjects[0].name", "dns-sa"},
		}},
		{"serviceAccount not created", []string{"serviceAccount.create=false"}, []at{
			{cSA, "", absent}, {cDep, pod + "serviceAccountName", "default"}, {cCRB, "subjects[0].name", "default"},
		}},
		{"serviceAccount not created, named", []string{"serviceAccount.create=false", "serviceAccount.name=dns"}, []at{
			{objectKey{"ServiceAccount", "dnsconfigurer", "dns"}, "", absent}, {cDep, pod + "serviceAccountName", "dns"}, {cCRB, "subjects[0].name", "dns"},
		}},
		{"rbac.create off", []string{"rbac.create=false", "autoscaler.enabled=true"}, []at{
			{cCR, "", absent}, {cCRB, "", absent}, {cShimCR, "", absent}, {cShimCRB, "", absent},
			{cCPACR, "", absent}, {cCPACRB, "", absent}, {cCPARole, "", absent}, {cCPARB, "", absent},
			{cSA, "", present}, {cCPASA, "", present}, {cCPA, pod + "serviceAccountName", "dnsconfigurer-dns-autoscaler"},
		}},
		{"rbac.create off, NRI plugin", []string{"rbac.create=false", "agent=nri"}, []at{{cNRICR, "", absent}, {cNRI, "", present}}},
		{"hpa", []string{"hpa.enabled=true", "hpa.minReplicas=3", "hpa.maxReplicas=12",
			`json:hpa.metrics=[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":60}}}]`,
			`json:hpa.behavior={"scaleDown":{"stabilizationWindowSeconds":600}}`}, []at{
			{cHPA, "apiVersion", "autoscaling/v2"},
			{cHPA, "spec", map[string]any{"minReplicas": 3, "maxReplicas": 12,
				"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "dnsconfigurer-dns"},
				"metrics":        []any{map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": 60}}}},
				"behavior":       map[string]any{"scaleDown": map[string]any{"stabilizationWindowSeconds": 600}}}},
			{cDep, "spec.replicas", absent}, {cCPA, "", absent},
		}},
		{"hpa defaults", []string{"hpa.enabled=true"}, []at{
			{cHPA, "spec.minReplicas", 2}, {cHPA, "spec.maxReplicas", 10}, {cHPA, "spec.metrics", absent}, {cHPA, "spec.behavior", absent},
		}},
		{"autoscaler", []string{"autoscaler.enabled=true"}, []at{
			{cDep, "spec.replicas", absent}, {cHPA, "", absent},
			{cCPA, ctr + "image", "registry.k8s.io/cpa/cluster-proportional-autoscaler:v1.9.0"},
			{cCPA, ctr + "command", []any{"/cluster-proportional-autoscaler", "--namespace=dnsconfigurer", "--configmap=dnsconfigurer-dns-autoscaler",
				"--target=Deployment/dnsconfigurer-dns", "--logtostderr=true", "--v=2"}},
			{cCPA, ctr + "livenessProbe", map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": 8080},
				"initialDelaySeconds": 10, "periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3, "successThreshold": 1}},
			{cCPA, pod + "priorityClassName", "system-cluster-critical"}, {cCPA, pod + "serviceAccountName", "dnsconfigurer-dns-autoscaler"},
			{cCPA, pod + "securityContext", map[string]any{"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}},
			{cCPA, ctr + "securityContext", map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}}}},
			{cCPA, pod + "nodeSelector", map[string]any{"kubernetes.io/os": "linux"}},
			{cCPA, pod + "tolerations", []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}}},
			{cCPACM, "data.linear", `{"coresPerReplica":256,"includeUnschedulableNodes":true,"max":0,"min":2,"nodesPerReplica":16,"preventSinglePointFailure":true}`},
			{cCPACR, "rules", []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes"}, "verbs": []any{"list", "watch"}}}},
			{cCPARole, "rules", []any{
				map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments/scale"}, "resourceNames": []any{"dnsconfigurer-dns"}, "verbs": []any{"get", "update"}},
				map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"dnsconfigurer-dns-autoscaler"}, "verbs": []any{"get"}}}},
			{cCPACRB, "subjects[0]", map[string]any{"kind": "ServiceAccount", "name": "dnsconfigurer-dns-autoscaler", "namespace": "dnsconfigurer"}},
			{cCPARB, "roleRef.name", "dnsconfigurer-dns-autoscaler"}, {cCPASA, "", present},
		}},
		{"autoscaler values", []string{"autoscaler.enabled=true", "autoscaler.coresPerReplica=128", "autoscaler.nodesPerReplica=8", "autoscaler.min=3", "autoscaler.max=30",
			"autoscaler.includeUnschedulableNodes=false", "autoscaler.preventSinglePointFailure=false", "autoscaler.podAnnotations.a=b",
			"autoscaler.podSecurityContext.fsGroup=65534", "autoscaler.securityContext.privileged=false", `json:autoscaler.customFlags=["--nodelabels=pool=system"]`,
			"autoscaler.image.repository=registry.example/cpa", "autoscaler.image.tag=v1.10.0", "autoscaler.image.pullPolicy=Always",
			`json:autoscaler.image.pullSecrets=[{"name":"cpa"}]`, `json:image.pullSecrets=[{"name":"all"}]`, "autoscaler.priorityClassName=cpa",
			`json:autoscaler.affinity={"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"pool","operator":"In","values":["system"]}]}}]}}`,
			"autoscaler.nodeSelector.pool=system", `json:autoscaler.tolerations=[{"operator":"Exists"}]`, "autoscaler.resources.limits.memory=32Mi",
			"autoscaler.configmap.annotations.a=b", "autoscaler.livenessProbe.periodSeconds=7", `json:autoscaler.extraContainers=[{"name":"sidecar","image":"busybox:1.36"}]`,
			"customLabels.team=dns"}, []at{
			{cCPACM, "data.linear", `{"coresPerReplica":128,"includeUnschedulableNodes":false,"max":30,"min":3,"nodesPerReplica":8,"preventSinglePointFailure":false}`},
			{cCPACM, "metadata.annotations.a", "b"}, {cCPA, podMeta + "annotations", map[string]any{"a": "b"}}, {cCPA, podMeta + "labels.team", "dns"},
			{cCPA, pod + "securityContext.fsGroup", 65534}, {cCPA, pod + "securityContext.runAsNonRoot", true}, {cCPA, ctr + "securityContext.privileged", false},
			{cCPA, ctr + "command[6]", "--nodelabels=pool=system"}, {cCPA, ctr + "image", "registry.example/cpa:v1.10.0"}, {cCPA, ctr + "imagePullPolicy", "Always"},
			{cCPA, pod + "imagePullSecrets", []any{map[string]any{"name": "all"}, map[string]any{"name": "cpa"}}}, {cCPA, pod + "priorityClassName", "cpa"},
			{cCPA, pod + "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", 1},
			{cCPA, pod + "nodeSelector", map[string]any{"kubernetes.io/os": "linux", "pool": "system"}}, {cCPA, pod + "tolerations", []any{map[string]any{"operator": "Exists"}}},
			{cCPA, ctr + "resources.limits.memory", "32Mi"}, {cCPA, ctr + "livenessProbe.periodSeconds", 7}, {cCPA, pod + "containers[1].name", "sidecar"},
			{cCPA, "metadata.labels.team", "dns"}, {cCPACR, "metadata.labels.team", "dns"},
		}},
		{"autoscaler priorityClassName falls back", []string{"autoscaler.enabled=true", "priorityClassName=dns"}, []at{{cCPA, pod + "priorityClassName", "dns"}}},
		{"autoscaler liveness off", []string{"autoscaler.enabled=true", "autoscaler.livenessProbe.enabled=false"}, []at{{cCPA, ctr + "livenessProbe", absent}}},
		{"autoscaler in place of CoreDNS", []string{"autoscaler.enabled=true", "placement=replace-coredns"}, []at{
			{cCPARC, ctr + "command[1]", "--namespace=kube-system"}, {cDepRC, "spec.replicas", absent},
		}},
		{"prometheus.monitor", []string{"prometheus.monitor.enabled=true"}, []at{
			{cSM, "apiVersion", "monitoring.coreos.com/v1"},
			{cSM, "metadata.labels", map[string]any{"app.kubernetes.io/name": "dnsconfigurer-dns", "app.kubernetes.io/part-of": "dnsconfigurer"}},
			{cSM, "spec", map[string]any{"endpoints": []any{map[string]any{"interval": "30s", "path": "/metrics", "port": "metrics"}},
				"namespaceSelector": map[string]any{"matchNames": []any{"dnsconfigurer"}},
				"selector":          map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "dnsconfigurer-dns"}}}},
			{cSvc, "spec.ports[2]", map[string]any{"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": "metrics"}},
		}},
		{"prometheus.monitor values", []string{"prometheus.monitor.enabled=true", "prometheus.monitor.additionalLabels.release=prom", "prometheus.monitor.namespace=monitoring",
			"prometheus.monitor.interval=15s", "prometheus.monitor.scrapeTimeout=10s", "prometheus.monitor.scheme=http", "prometheus.monitor.honorLabels=true",
			`json:prometheus.monitor.tlsConfig={"insecureSkipVerify":false}`,
			`json:prometheus.monitor.relabelings=[{"action":"keep","sourceLabels":["__meta_kubernetes_service_name"],"regex":"dnsconfigurer-dns"}]`,
			`json:prometheus.monitor.metricRelabelings=[{"action":"drop","sourceLabels":["__name__"],"regex":"go_.*"}]`,
			`json:prometheus.monitor.selector={"matchLabels":{"app.kubernetes.io/part-of":"dnsconfigurer"}}`}, []at{
			{cSM, "", absent},
			{objectKey{"ServiceMonitor", "monitoring", "dnsconfigurer-dns"}, "metadata.labels.release", "prom"},
			{objectKey{"ServiceMonitor", "monitoring", "dnsconfigurer-dns"}, "spec", map[string]any{
				"endpoints": []any{map[string]any{"path": "/metrics", "port": "metrics", "interval": "15s", "scrapeTimeout": "10s", "scheme": "http", "honorLabels": true,
					"tlsConfig":         map[string]any{"insecureSkipVerify": false},
					"relabelings":       []any{map[string]any{"action": "keep", "sourceLabels": []any{"__meta_kubernetes_service_name"}, "regex": "dnsconfigurer-dns"}},
					"metricRelabelings": []any{map[string]any{"action": "drop", "sourceLabels": []any{"__name__"}, "regex": "go_.*"}}}},
				"namespaceSelector": map[string]any{"matchNames": []any{"dnsconfigurer"}},
				"selector":          map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/part-of": "dnsconfigurer"}}}},
		}},
		{"prometheus.monitor in place of CoreDNS", []string{"prometheus.monitor.enabled=true", "placement=replace-coredns"}, []at{
			{cSMRC, "spec.selector", map[string]any{"matchLabels": map[string]any{"k8s-app": "kube-dns"}}},
			{cSMRC, "spec.namespaceSelector.matchNames", []any{"kube-system"}},
			{cKubeDNS, "spec.ports[2].name", "metrics"},
		}},
		{"image.pullSecrets on every pod", []string{`json:image.pullSecrets=[{"name":"regcred"}]`, "autoscaler.enabled=true"}, []at{
			{cDep, pod + "imagePullSecrets", []any{map[string]any{"name": "regcred"}}}, {cWH, pod + "imagePullSecrets", []any{map[string]any{"name": "regcred"}}},
			{cNL, pod + "imagePullSecrets", []any{map[string]any{"name": "regcred"}}}, {cShim, pod + "imagePullSecrets", []any{map[string]any{"name": "regcred"}}},
			{cCPA, pod + "imagePullSecrets", []any{map[string]any{"name": "regcred"}}}, {cTestPod, "spec.imagePullSecrets", []any{map[string]any{"name": "regcred"}}},
		}},
		{"image.pullSecrets on the NRI plugin", []string{`json:image.pullSecrets=[{"name":"regcred"}]`, "agent=nri"}, []at{
			{cNRI, pod + "imagePullSecrets", []any{map[string]any{"name": "regcred"}}},
		}},
		{"nodeLocal pod values", []string{"nodeLocal.resources.requests.cpu=50m", `json:nodeLocal.tolerations=[{"key":"edge","operator":"Exists"}]`,
			"nodeLocal.nodeSelector.pool=edge", `json:nodeLocal.affinity={"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"pool","operator":"In","values":["edge"]}]}}]}}`,
			"nodeLocal.priorityClassName=node-dns", "nodeLocal.podAnnotations.a=b", "nodeLocal.podLabels.team=dns", "canary.enabled=true"}, []at{
			{cNL, ctr + "resources", map[string]any{"limits": map[string]any{"memory": "128Mi"}, "requests": map[string]any{"cpu": "50m", "memory": "32Mi"}}},
			{cNL, pod + "tolerations", []any{map[string]any{"key": "edge", "operator": "Exists"}}},
			{cNL, pod + "nodeSelector", map[string]any{"kubernetes.io/os": "linux", "pool": "edge", canary: "true"}},
			{cNL, pod + "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key", "pool"},
			{cNL, pod + "priorityClassName", "node-dns"},
			{cNL, podMeta + "annotations", map[string]any{"a": "b", "prometheus.io/path": "/metrics", "prometheus.io/port": "9353", "prometheus.io/scrape": "true"}},
			{cNL, podMeta + "labels", map[string]any{"app.kubernetes.io/component": "node-local-dns", "app.kubernetes.io/instance": "dnsconfigurer-node-local-dns", "team": "dns"}},
		}},
		{"shim pod values", []string{"shim.resources.limits.memory=96Mi", `json:shim.tolerations=[{"key":"edge","operator":"Exists"}]`,
			"shim.nodeSelector.pool=edge", `json:shim.affinity={"nodeAffinity":{}}`, "shim.priorityClassName=node-agent", "shim.podAnnotations.a=b", "shim.podLabels.team=dns"}, []at{
			{cShim, ctr + "resources", map[string]any{"limits": map[string]any{"memory": "96Mi"}, "requests": map[string]any{"cpu": "20m", "memory": "48Mi"}}},
			{cShim, pod + "tolerations", []any{map[string]any{"key": "edge", "operator": "Exists"}}},
			{cShim, pod + "nodeSelector", map[string]any{"kubernetes.io/os": "linux", "pool": "edge"}},
			{cShim, pod + "affinity", map[string]any{"nodeAffinity": map[string]any{}}}, {cShim, pod + "priorityClassName", "node-agent"},
			{cShim, podMeta + "annotations.a", "b"}, {cShim, podMeta + `annotations["dnsconfigurer.io/config-checksum"]`, present},
			{cShim, podMeta + "labels", map[string]any{"app.kubernetes.io/component": "shim", "app.kubernetes.io/instance": "dnsconfigurer-shim", "team": "dns"}},
		}},
		{"nri pod values", []string{"agent=nri", "nri.resources.requests.cpu=30m", `json:nri.tolerations=[{"key":"edge","operator":"Exists"}]`,
			"nri.nodeSelector.pool=edge", `json:nri.affinity={"nodeAffinity":{}}`, "nri.priorityClassName=node-agent", "nri.podAnnotations.a=b", "nri.podLabels.team=dns", "canary.enabled=true"}, []at{
			{cNRI, ctr + "resources", map[string]any{"limits": map[string]any{"memory": "256Mi"}, "requests": map[string]any{"cpu": "30m", "memory": "48Mi"}}},
			{cNRI, pod + "tolerations", []any{map[string]any{"key": "edge", "operator": "Exists"}}},
			{cNRI, pod + "nodeSelector", map[string]any{"kubernetes.io/os": "linux", "pool": "edge", canary: "true"}},
			{cNRI, pod + "affinity", map[string]any{"nodeAffinity": map[string]any{}}}, {cNRI, pod + "priorityClassName", "node-agent"},
			{cNRI, podMeta + "annotations", map[string]any{"a": "b"}},
			{cNRI, podMeta + "labels", map[string]any{"app.kubernetes.io/component": "nri", "app.kubernetes.io/instance": "dnsconfigurer-nri", "team": "dns"}},
		}},
		{"webhook pod values", []string{"webhook.replicaCount=3", "webhook.podDisruptionBudget.minAvailable=2", "webhook.resources.requests.cpu=100m",
			`json:webhook.tolerations=[{"key":"system","operator":"Exists"}]`, "webhook.nodeSelector.pool=system", `json:webhook.affinity={"podAntiAffinity":{}}`,
			"webhook.priorityClassName=webhook", "webhook.podAnnotations.a=b", "webhook.podLabels.team=dns"}, []at{
			{cWH, "spec.replicas", 3},
			{cWHPDB, "spec", map[string]any{"minAvailable": 2, "selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/component": "webhook", "app.kubernetes.io/instance": "dnsconfigurer-webhook"}}}},
			{cWH, ctr + "resources", map[string]any{"limits": map[string]any{"memory": "128Mi"}, "requests": map[string]any{"cpu": "100m", "memory": "32Mi"}}},
			{cWH, pod + "tolerations", []any{map[string]any{"key": "system", "operator": "Exists"}}},
			{cWH, pod + "nodeSelector", map[string]any{"kubernetes.io/os": "linux", "pool": "system"}},
			{cWH, pod + "affinity", map[string]any{"podAntiAffinity": map[string]any{}}}, {cWH, pod + "priorityClassName", "webhook"},
			{cWH, podMeta + "annotations", map[string]any{"a": "b"}},
			{cWH, podMeta + "labels", map[string]any{"app.kubernetes.io/component": "webhook", "app.kubernetes.io/instance": "dnsconfigurer-webhook", "team": "dns"}},
		}},
		{"webhook podDisruptionBudget null", []string{"webhook.podDisruptionBudget=null"}, []at{{cWHPDB, "", absent}, {cWH, "", present}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkAt(t, chartObjectsAll(t, helmTemplate(t, helm, helmFlags(tc.values)...)), tc.want)
		})
	}
}

// TestChartCoreDNSSchema: values of the coredns/helm keys that cannot work
// are refused, naming the value: by values.schema.json (a wrong type, a
// value out of range, an unknown key) or by the templates (values that
// conflict).
func TestChartCoreDNSSchema(t *testing.T) {
	helm := helmBin(t)
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		values []string
		want   string
	}{
		// Unknown keys.
		{[]string{"replicas=2"}, "additional properties 'replicas' not allowed"},
		{[]string{"nodeLocal.replicaCount=2"}, "at '/nodeLocal': additional properties 'replicaCount' not allowed"},
		{[]string{"shim.podDisruptionBudget.minAvailable=1"}, "at '/shim': additional properties 'podDisruptionBudget' not allowed"},
		{[]string{"webhook.hpa.enabled=true"}, "at '/webhook': additional properties 'hpa' not allowed"},
		{[]string{"nri.tolerance=x"}, "at '/nri': additional properties 'tolerance' not allowed"},
		{[]string{"prometheus.service.enabled=true"}, "at '/prometheus': additional properties 'service' not allowed"},
		{[]string{"prometheus.monitor.port=metrics"}, "at '/prometheus/monitor': additional properties 'port' not allowed"},
		{[]string{"autoscaler.replicas=1"}, "at '/autoscaler': additional properties 'replicas' not allowed"},
		{[]string{"service.type=NodePort"}, "at '/service': additional properties 'type' not allowed"},
		{[]string{"deployment.enabled=false"}, "at '/deployment': additional properties 'enabled' not allowed"},
		{[]string{"rbac.pspEnable=true"}, "at '/rbac': additional properties 'pspEnable' not allowed"},
		{[]string{"securityContext.runAsRoot=true"}, "at '/securityContext': additional properties 'runAsRoot' not allowed"},
		{[]string{"affinity.antiAffinity.x=y"}, "at '/affinity': additional properties 'antiAffinity' not allowed"},
		// Wrong types.
		{[]string{"replicaCount=two"}, "at '/replicaCount': got string, want integer"},
		{[]string{"customLabels=team"}, "at '/customLabels': got string, want object"},
		{[]string{"nri.podAnnotations.a=1"}, "at '/nri/podAnnotations/a': got number, want string"},
		{[]string{`json:image.pullSecrets=["regcred"]`}, "at '/image/pullSecrets/0': got string, want object"},
		{[]string{`json:tolerations={"key":"a"}`}, "at '/tolerations': got object, want array"},
		{[]string{"hpa.enabled=yes"}, "at '/hpa/enabled': got string, want boolean"},
		{[]string{"webhook.replicaCount=many"}, "at '/webhook/replicaCount': got string, want integer"},
		{[]string{`json:priorityClassName=["a"]`}, "at '/priorityClassName': got array, want string"},
		// Out of range.
		{[]string{"replicaCount=0"}, "at '/replicaCount': minimum: got 0, want 1"},
		{[]string{"webhook.replicaCount=0"}, "at '/webhook/replicaCount': minimum: got 0, want 1"},
		{[]string{"resources.requests.cpu=lots"}, "at '/resources/requests/cpu'"},
		{[]string{"nodeLocal.resources.limits.memory=-1"}, "at '/nodeLocal/resources/limits/memory'"},
		{[]string{"rollingUpdate.maxSurge=lots"}, "at '/rollingUpdate/maxSurge'"},
		{[]string{"terminationGracePeriodSeconds=-1"}, "at '/terminationGracePeriodSeconds': minimum: got -1, want 0"},
		{[]string{"podLabels.team=" + long}, "at '/podLabels/team': maxLength: got 64, want 63"},
		{[]string{"podLabels.bad key=x"}, "invalid propertyName 'bad key'"},
		{[]string{"tolerations[0].operator=Maybe"}, "at '/tolerations/0/operator': value must be one of 'Exists', 'Equal'"},
		{[]string{`json:topologySpreadConstraints=[{"maxSkew":0,"topologyKey":"zone","whenUnsatisfiable":"ScheduleAnyway"}]`}, "at '/topologySpreadConstraints/0/maxSkew'"},
		{[]string{`json:topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"zone"}]`}, "missing property 'whenUnsatisfiable'"},
		{[]string{"priorityClassName=High_Priority"}, "at '/priorityClassName'"},
		{[]string{"livenessProbe.successThreshold=2"}, "at '/livenessProbe/successThreshold': value must be one of 1"},
		{[]string{"readinessProbe.periodSeconds=0"}, "at '/readinessProbe/periodSeconds': minimum: got 0, want 1"},
		{[]string{"podSecurityContext.seccompProfile.type=Permissive"}, "at '/podSecurityContext/seccompProfile/type'"},
		{[]string{"podDisruptionBudget.unhealthyPodEvictionPolicy=Never"}, "at '/podDisruptionBudget/unhealthyPodEvictionPolicy'"},
		{[]string{"webhook.podDisruptionBudget.minAvailable=-1"}, "at '/webhook/podDisruptionBudget/minAvailable'"},
		{[]string{`json:extraVolumeMounts=[{"name":"x","mountPath":"etc/x"}]`}, "at '/extraVolumeMounts/0/mountPath'"},
		{[]string{`json:extraContainers=[{"name":"x"}]`}, "missing property 'image'"},
		{[]string{`json:env=[{"value":"x"}]`}, "missing property 'name'"},
		{[]string{"deployment.dnsPolicy=ClusterFirst"}, "at '/deployment/dnsPolicy': value must be one of 'Default', 'None'"},
		{[]string{`json:deployment.dnsConfig={"nameservers":["dns.example"]}`}, "at '/deployment/dnsConfig/nameservers/0'"},
		{[]string{"service.trafficDistribution=Nearby"}, "at '/service/trafficDistribution'"},
		{[]string{"serviceAccount.name=DNS_SA"}, "at '/serviceAccount/name'"},
		{[]string{"hpa.minReplicas=0"}, "at '/hpa/minReplicas': minimum: got 0, want 1"},
		{[]string{`json:hpa.metrics=[{"type":"Magic"}]`}, "at '/hpa/metrics/0/type'"},
		{[]string{"autoscaler.coresPerReplica=0"}, "at '/autoscaler/coresPerReplica'"},
		{[]string{"autoscaler.min=-1"}, "at '/autoscaler/min': minimum: got -1, want 0"},
		{[]string{"autoscaler.image.tag="}, "at '/autoscaler/image/tag'"},
		{[]string{`json:autoscaler.customFlags=["nodelabels=a"]`}, "at '/autoscaler/customFlags/0'"},
		{[]string{"prometheus.monitor.interval=30"}, "at '/prometheus/monitor/interval'"},
		{[]string{"prometheus.monitor.scheme=ftp"}, "at '/prometheus/monitor/scheme'"},
		{[]string{"prometheus.monitor.namespace=Monitoring"}, "at '/prometheus/monitor/namespace'"},
		// Values that conflict: the templates refuse them.
		{[]string{"podDisruptionBudget.maxUnavailable=1"}, "podDisruptionBudget: minAvailable and maxUnavailable are exclusive"},
		{[]string{"webhook.podDisruptionBudget.maxUnavailable=1"}, "webhook.podDisruptionBudget: minAvailable and maxUnavailable are exclusive"},
		{[]string{"hpa.enabled=true", "autoscaler.enabled=true"}, "hpa.enabled and autoscaler.enabled: pick one"},
		{[]string{"hpa.enabled=true", "hpa.minReplicas=5", "hpa.maxReplicas=3"}, "hpa.minReplicas 5 is above hpa.maxReplicas 3"},
		{[]string{"rollingUpdate.maxSurge=0"}, "rollingUpdate: maxSurge and maxUnavailable cannot both be 0"},
		{[]string{"deployment.dnsPolicy=None"}, "deployment.dnsConfig: needed with deployment.dnsPolicy None"},
	} {
		t.Run(strings.Join(tc.values, ","), func(t *testing.T) {
			_, err := helmTemplateErr(t, helm, helmFlags(tc.values)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template %s: %v\nwant an error with %q", strings.Join(tc.values, " "), err, tc.want)
			}
		})
	}
}

// allValues sets every pod and metadata value of the chart to something
// other than its default (hpa in allValuesHPA, as it excludes autoscaler).
const allValues = `
image:
  pullSecrets: [{name: regcred}]
replicaCount: 3
resources: {limits: {memory: 512Mi, cpu: "1"}, requests: {cpu: 200m, memory: 128Mi}}
rollingUpdate: {maxUnavailable: 1, maxSurge: 25%}
terminationGracePeriodSeconds: 45
podAnnotations: {example.com/pod: a}
podLabels: {example.com/pod: l}
customLabels: {example.com/team: dns}
customAnnotations: {example.com/owner: platform}
priorityClassName: dns-critical
podSecurityContext: {fsGroup: 65532}
securityContext: {privileged: false}
livenessProbe: {initialDelaySeconds: 20, successThreshold: 1}
readinessProbe: {failureThreshold: 2, initialDelaySeconds: 1, successThreshold: 2}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: example.com/dns, operator: In, values: ["true"]}]
topologySpreadConstraints:
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: DoNotSchedule
  labelSelector: {matchLabels: {app.kubernetes.io/instance: '{{ "dnsconfigurer-dns" }}'}}
nodeSelector: {example.com/pool: system}
tolerations: [{key: example.com/dedicated, operator: Equal, value: dns, effect: NoSchedule}]
podDisruptionBudget: {minAvailable: 50%, unhealthyPodEvictionPolicy: AlwaysAllow}
env: [{name: GODEBUG, value: "madvdontneed=1"}]
extraVolumes: [{name: hosts, configMap: {name: dns-hosts}}]
extraVolumeMounts: [{name: hosts, mountPath: /etc/dnsconfigurer/hosts, readOnly: true}]
extraContainers: [{name: sidecar, image: "busybox:1.36"}]
initContainers: [{name: init, image: "busybox:1.36"}]
deployment:
  annotations: {example.com/deploy: d}
  dnsPolicy: None
  dnsConfig: {nameservers: [192.0.2.53]}
service:
  annotations: {example.com/svc: s}
  trafficDistribution: PreferClose
serviceAccount: {create: true, name: dns-sa, annotations: {example.com/sa: x}}
rbac: {create: true}
autoscaler:
  enabled: true
  coresPerReplica: 128
  nodesPerReplica: 8
  min: 3
  max: 20
  includeUnschedulableNodes: false
  preventSinglePointFailure: false
  podAnnotations: {example.com/cpa: p}
  podSecurityContext: {fsGroup: 65534}
  securityContext: {privileged: false}
  customFlags: [--nodelabels=example.com/pool=system]
  image: {repository: registry.example/cpa, tag: v1.10.0, pullPolicy: Always, pullSecrets: [{name: cpa-cred}]}
  priorityClassName: cpa-prio
  affinity: {nodeAffinity: {}}
  nodeSelector: {example.com/pool: system}
  tolerations: [{operator: Exists}]
  resources: {limits: {memory: 32Mi}}
  configmap: {annotations: {example.com/cm: c}}
  livenessProbe: {enabled: true, periodSeconds: 7}
  extraContainers: [{name: cpa-sidecar, image: "busybox:1.36"}]
prometheus:
  monitor:
    enabled: true
    additionalLabels: {release: prom}
    namespace: monitoring
    interval: 15s
    scrapeTimeout: 10s
    scheme: http
    honorLabels: true
    tlsConfig: {insecureSkipVerify: false}
    relabelings: [{action: keep, sourceLabels: [__meta_kubernetes_service_name], regex: dnsconfigurer-dns}]
    metricRelabelings: [{action: drop, sourceLabels: [__name__], regex: go_.*}]
    selector: {matchLabels: {app.kubernetes.io/name: dnsconfigurer-dns}}
nodeLocal:
  resources: {requests: {cpu: 50m}}
  tolerations: [{key: a, operator: Exists}]
  nodeSelector: {example.com/nl: "yes"}
  affinity: {nodeAffinity: {}}
  priorityClassName: nl-prio
  podAnnotations: {example.com/nl: a}
  podLabels: {example.com/nl: l}
webhook:
  replicaCount: 3
  podDisruptionBudget: {minAvailable: 2}
  resources: {requests: {cpu: 60m}}
  tolerations: [{key: b, operator: Exists}]
  nodeSelector: {example.com/wh: "yes"}
  affinity: {podAntiAffinity: {}}
  priorityClassName: wh-prio
  podAnnotations: {example.com/wh: a}
  podLabels: {example.com/wh: l}
shim:
  resources: {requests: {cpu: 30m}}
  tolerations: [{key: c, operator: Exists}]
  nodeSelector: {example.com/shim: "yes"}
  affinity: {nodeAffinity: {}}
  priorityClassName: shim-prio
  podAnnotations: {example.com/shim: a}
  podLabels: {example.com/shim: l}
nri:
  resources: {requests: {cpu: 40m}}
  tolerations: [{key: d, operator: Exists}]
  nodeSelector: {example.com/nri: "yes"}
  affinity: {nodeAffinity: {}}
  priorityClassName: nri-prio
  podAnnotations: {example.com/nri: a}
  podLabels: {example.com/nri: l}
`

// allValuesHPA is allValues with the HorizontalPodAutoscaler in place of
// the cluster-proportional-autoscaler.
const allValuesHPA = `
autoscaler: {enabled: false}
hpa:
  enabled: true
  minReplicas: 3
  maxReplicas: 9
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
  behavior: {scaleDown: {stabilizationWindowSeconds: 300}}
`

// TestChartCoreDNSLint: helm lint --strict is clean with the defaults and
// with every pod and metadata value set (allValues), and helm template
// renders the latter for both agents and placements. Lint runs the
// templates too, but reports their failures only as INFO lines, so those
// fail the test here.
func TestChartCoreDNSLint(t *testing.T) {
	helm := helmBin(t)
	dir := t.TempDir()
	writeFile(t, dir, "all.yaml", []byte(allValues))
	writeFile(t, dir, "hpa.yaml", []byte(allValuesHPA))
	all, hpa := filepath.Join(dir, "all.yaml"), filepath.Join(dir, "hpa.yaml")
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"defaults", nil},
		{"every value, autoscaler", []string{"-f", all}},
		{"every value, hpa", []string{"-f", all, "-f", hpa}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), helm, append([]string{"lint", "--strict", chartDir, "--kube-version", chartKubeVersion}, tc.flags...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			if strings.Contains(string(out), "Fail:") || !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint --strict:\n%s", out)
			}
			if tc.flags == nil {
				return
			}
			for _, agent := range []string{"shim", "nri"} {
				for _, placement := range []string{"side-by-side", "replace-coredns"} {
					objs := chartObjectsAll(t, helmTemplate(t, helm, append(tc.flags, "--set", "agent="+agent, "--set", "placement="+placement)...))
					ns := "dnsconfigurer"
					if placement == "replace-coredns" {
						ns = "kube-system"
					}
					dep := objectKey{"Deployment", ns, "dnsconfigurer-dns"}
					checkAt(t, objs, []at{
						{dep, "spec.replicas", absent}, {dep, pod + "serviceAccountName", "dns-sa"}, {dep, "metadata.labels", present},
						{objectKey{"ServiceMonitor", "monitoring", "dnsconfigurer-dns"}, "", present},
						{objectKey{"DaemonSet", "dnsconfigurer-node", "dnsconfigurer-" + agent}, pod + "priorityClassName", agent + "-prio"},
					})
				}
			}
		})
	}
}

// TestChartValuesDocumented: the chart README's values table has a row for
// every key values.schema.json declares (down to a key the table names
// whole, such as resources), and names no key the schema lacks.
func TestChartValuesDocumented(t *testing.T) {
	schema := loadChartSchema(t)
	readme := readChartFile(t, "README.md")
	start := strings.Index(readme, "\n## Values\n")
	end := strings.Index(readme[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("README.md: no ## Values section")
	}
	documented := map[string]bool{}
	for _, row := range tableRows(readme[start : start+1+end]) {
		for _, k := range rowKeys(row[0]) {
			documented[k] = true
			if !schema.has(k) {
				t.Errorf("README.md names %s, which values.schema.json does not have", k)
			}
		}
	}
	var walk func(path string, node map[string]any)
	n := 0
	walk = func(path string, node map[string]any) {
		if documented[path] {
			n++
			return
		}
		kids := schema.children(node)
		if len(kids) == 0 {
			t.Errorf("README.md's values table has no row for %s", path)
			return
		}
		names := make([]string, 0, len(kids))
		for k := range kids {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walk(p, kids[k])
		}
	}
	walk("", schema.root)
	t.Logf("%d keys of values.schema.json documented", n)
}

// corednsHelmKeys are the keys of coredns/helm's chart
// (github.com/coredns/helm, charts/coredns at commit caac031, chart
// 1.46.2): values.yaml's, down to the values that are Kubernetes objects
// or free maps, and those only its templates read or its comments show.
var corednsHelmKeys = []string{
	// values.yaml
	"image.repository", "image.tag", "image.pullPolicy", "image.pullSecrets", "replicaCount", "resources",
	"rollingUpdate.maxUnavailable", "rollingUpdate.maxSurge", "terminationGracePeriodSeconds", "podAnnotations", "podLabels",
	"serviceType", "prometheus.service.enabled", "prometheus.service.annotations", "prometheus.service.selector",
	"prometheus.monitor.enabled", "prometheus.monitor.additionalLabels", "prometheus.monitor.namespace", "prometheus.monitor.interval",
	"prometheus.monitor.scrapeTimeout", "prometheus.monitor.scheme", "prometheus.monitor.honorLabels", "prometheus.monitor.tlsConfig",
	"prometheus.monitor.relabelings", "prometheus.monitor.metricRelabelings", "prometheus.monitor.selector",
	"service.name", "service.annotations", "service.selector", "serviceAccount.create", "serviceAccount.name", "serviceAccount.annotations",
	"rbac.create", "clusterRole.nameOverride", "isClusterService", "priorityClassName", "podSecurityContext", "securityContext",
	"servers", "extraConfig",
	"livenessProbe.enabled", "livenessProbe.initialDelaySeconds", "livenessProbe.periodSeconds", "livenessProbe.timeoutSeconds",
	"livenessProbe.failureThreshold", "livenessProbe.successThreshold",
	"readinessProbe.enabled", "readinessProbe.initialDelaySeconds", "readinessProbe.periodSeconds", "readinessProbe.timeoutSeconds",
	"readinessProbe.failureThreshold", "readinessProbe.successThreshold",
	"affinity", "topologySpreadConstraints", "nodeSelector", "tolerations", "podDisruptionBudget", "zoneFiles",
	"extraContainers", "extraVolumes", "extraVolumeMounts", "extraSecrets", "env", "customLabels", "customAnnotations",
	"hpa.enabled", "hpa.minReplicas", "hpa.maxReplicas", "hpa.metrics",
	"autoscaler.enabled", "autoscaler.coresPerReplica", "autoscaler.nodesPerReplica", "autoscaler.min", "autoscaler.max",
	"autoscaler.includeUnschedulableNodes", "autoscaler.preventSinglePointFailure", "autoscaler.podAnnotations",
	"autoscaler.podSecurityContext", "autoscaler.securityContext",
	"autoscaler.image.repository", "autoscaler.image.tag", "autoscaler.image.pullPolicy", "autoscaler.image.pullSecrets",
	"autoscaler.priorityClassName", "autoscaler.affinity", "autoscaler.nodeSelector", "autoscaler.tolerations", "autoscaler.resources",
	"autoscaler.configmap.annotations",
	"autoscaler.livenessProbe.enabled", "autoscaler.livenessProbe.initialDelaySeconds", "autoscaler.livenessProbe.periodSeconds",
	"autoscaler.livenessProbe.timeoutSeconds", "autoscaler.livenessProbe.failureThreshold", "autoscaler.livenessProbe.successThreshold",
	"autoscaler.extraContainers",
	"deployment.skipConfig", "deployment.enabled", "deployment.name", "deployment.annotations", "deployment.selector",
	"deployment.dnsPolicy", "deployment.dnsConfig", "initContainers",
	// commented out in values.yaml, read by the templates
	"service.clusterIP", "service.clusterIPs", "service.loadBalancerIP", "service.loadBalancerClass", "service.externalIPs",
	"service.externalTrafficPolicy", "service.ipFamilyPolicy", "service.trafficDistribution", "k8sAppLabelOverride",
	"autoscaler.customFlags", "hpa.behavior",
	// only in the templates
	"nameOverride", "fullnameOverride", "automountServiceAccountToken", "rbac.pspEnable", "rbac.multiclusterEnable",
}

// TestChartCoreDNSTable: the README's table against coredns/helm has a row
// for every key of coredns/helm's chart and no other, and its claims hold
// against values.schema.json: "the same key(s)" are ours, a key of ours it
// names instead exists and coredns/helm's does not, and a key "not
// applicable" is not ours.
func TestChartCoreDNSTable(t *testing.T) {
	schema := loadChartSchema(t)
	readme := readChartFile(t, "README.md")
	start := strings.Index(readme, "\n## Values against coredns/helm\n")
	if start < 0 {
		t.Fatal("README.md: no ## Values against coredns/helm section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	want := map[string]bool{}
	for _, k := range corednsHelmKeys {
		want[k] = true
	}
	seen := map[string]bool{}
	for _, row := range tableRows(section) {
		if len(row) != 3 {
			t.Errorf("row %q: want 3 cells", row)
			continue
		}
		keys, ours, same := rowKeys(row[0]), row[1], row[2]
		for _, k := range keys {
			if !want[k] {
				t.Errorf("row %s: %s is not a key of coredns/helm's chart", row[0], k)
			}
			if seen[k] {
				t.Errorf("%s: two rows", k)
			}
			seen[k] = true
		}
		switch {
		case strings.HasPrefix(ours, "not applicable"):
			if same != "n/a" {
				t.Errorf("row %s: not applicable, same meaning %q, want n/a", row[0], same)
			}
			for _, k := range keys {
				if schema.has(k) {
					t.Errorf("row %s: %s is not applicable, but values.schema.json has it", row[0], k)
				}
			}
			continue
		case strings.HasPrefix(ours, "the same key"):
			for _, k := range keys {
				if !schema.has(k) {
					t.Errorf("row %s: %s is ours, says the table, but not in values.schema.json", row[0], k)
				}
			}
		default:
			names := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(ours, -1)
			if len(names) == 0 {
				t.Errorf("row %s: ours %q names no key", row[0], ours)
			}
			oursSet := map[string]bool{}
			for _, m := range names {
				oursSet[m[1]] = true
				if !schema.has(m[1]) {
					t.Errorf("row %s: ours %s is not in values.schema.json", row[0], m[1])
				}
			}
			for _, k := range keys {
				if !oursSet[k] && schema.has(k) {
					t.Errorf("row %s: %s is ours too; the row should say so", row[0], k)
				}
			}
		}
		if !strings.HasPrefix(same, "yes") && !strings.HasPrefix(same, "no") {
			t.Errorf("row %s: same meaning %q, want yes or no first", row[0], same)
		}
	}
	for _, k := range corednsHelmKeys {
		if !seen[k] {
			t.Errorf("coredns/helm's %s: no row in README.md's table", k)
		}
	}
	t.Logf("%d keys of coredns/helm's chart in the table", len(seen))
}

// chartSchema is values.schema.json.
type chartSchema struct{ root map[string]any }

func loadChartSchema(t *testing.T) chartSchema {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal([]byte(readChartFile(t, "values.schema.json")), &root); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return chartSchema{root}
}

// children are the properties of node, its $ref's and its allOf's.
func (s chartSchema) children(node map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	if ref, ok := node["$ref"].(string); ok {
		def, _ := fieldPath(s.root, strings.ReplaceAll(strings.TrimPrefix(ref, "#/"), "/", "."))
		if d, ok := def.(map[string]any); ok {
			for k, v := range s.children(d) {
				out[k] = v
			}
		}
	}
	all, _ := node["allOf"].([]any)
	for _, a := range all {
		if m, ok := a.(map[string]any); ok {
			for k, v := range s.children(m) {
				if _, dup := out[k]; !dup {
					out[k] = v
				}
			}
		}
	}
	props, _ := node["properties"].(map[string]any)
	for k, v := range props {
		if m, ok := v.(map[string]any); ok {
			out[k] = m
		}
	}
	return out
}

// has reports whether the schema declares the dotted key.
func (s chartSchema) has(key string) bool {
	node := s.root
	for _, p := range strings.Split(key, ".") {
		next, ok := s.children(node)[p]
		if !ok {
			return false
		}
		node = next
	}
	return true
}

func readChartFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tableRows are the cells of the rows of the Markdown tables in text whose
// first cell starts with a code span.
func tableRows(text string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// rowKeys are the keys a first cell names: `a.b.c`, then `.d` for a.b.d.
func rowKeys(cell string) []string {
	var keys []string
	parent := ""
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
		k := m[1]
		if strings.HasPrefix(k, ".") {
			k = parent + k
		} else if i := strings.LastIndex(k, "."); i >= 0 {
			parent = k[:i]
		} else {
			parent = ""
		}
		keys = append(keys, k)
	}
	return keys
}
