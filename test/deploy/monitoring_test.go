package deploy

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

const monitoringDir = deployDir + "/monitoring"

// prometheusRule is the monitoring.coreos.com/v1 PrometheusRule fields
// deploy/monitoring uses (decoded strictly by loadSources too).
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert       string            `json:"alert,omitempty"`
				Record      string            `json:"record,omitempty"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels,omitempty"`
				Annotations map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// targetLabels are the labels Prometheus gives every series of a scrape
// (the Prometheus Operator's and the usual kubernetes_sd relabelling):
// queries may use them on any metric.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint", "node"}

// served is what one component's /metrics holds: for each series name
// (a histogram's _bucket, _sum and _count), each label with its values.
type served map[string]map[string]map[string]bool

// components are the served metrics by component, named by the value of
// their server label.
type components map[string]served

// TestMonitoring: every metric and label that the PrometheusRule and the
// Grafana dashboard in deploy/monitoring use exists on the /metrics of the
// component that serves it. It runs the binary as the cluster DNS (records
// from examples/objects, a stub upstream and a stub domain whose upstream
// is down) and as the node-local stage in front of it, sends queries over
// UDP and TCP to both (cached ones too, which node-local answers from their
// wire form), and scrapes them. Each query's selectors, grouping labels,
// histogram_quantile inputs and the labels its alert annotations print are
// checked (checkExpr); a selector with server="cluster" or "nodelocal" is
// checked against that component only, and the values of its equality
// matchers must have been seen.
func TestMonitoring(t *testing.T) {
	comps := scrapeComponents(t)
	exprs := monitoringExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("found %d queries in deploy/monitoring, want the rules' and the dashboard's", len(exprs))
	}
	for _, e := range exprs {
		if err := checkExpr(comps, e.expr, e.printed); err != nil {
			t.Errorf("%s: %v\n%s", e.where, err, e.expr)
		}
	}
	t.Logf("%d queries checked against %d cluster DNS and %d node-local series names", len(exprs), len(comps["cluster"]), len(comps["nodelocal"]))
	for name, comp := range comps {
		for series := range comp {
			if strings.HasPrefix(series, "coredns_") {
				t.Errorf("%s serves %s without --coredns-metrics", name, series)
			}
		}
	}
	checkRuleFields(t)
	checkRenderedMonitoring(t)
}

// TestCheckExprCatches: the checker rejects a missing metric, a missing
// label in a matcher, a grouping or an annotation, a server value no
// component has, a label only the other component's series have, a
// quantile over a histogram's count, and an equality value never seen.
func TestCheckExprCatches(t *testing.T) {
	comps := components{
		"cluster": served{
			"dnsconfigurer_dnsserver_responses_total": {"server": {"cluster": true}, "zone": {".": true}, "rcode": {"NOERROR": true, "SERVFAIL": true}},
			"dnsconfigurer_dnsserver_synced":          {},
		},
		"nodelocal": served{
			"dnsconfigurer_dnsserver_responses_total":                 {"server": {"nodelocal": true}, "zone": {".": true}, "rcode": {"NOERROR": true}},
			"dnsconfigurer_nodelocal_cache_hits_total":                {"type": {"A": true}},
			"dnsconfigurer_dnsserver_request_duration_seconds_bucket": {"server": {"nodelocal": true}, "zone": {".": true}, "type": {"A": true}, "le": {"+Inf": true}},
			"dnsconfigurer_dnsserver_request_duration_seconds_count":  {"server": {"nodelocal": true}, "zone": {".": true}, "type": {"A": true}},
		},
	}
	good := []string{
		`sum by (zone) (rate(dnsconfigurer_dnsserver_responses_total{server="cluster", rcode="SERVFAIL"}[5m]))`,
		`histogram_quantile(0.99, sum by (zone, le) (rate(dnsconfigurer_dnsserver_request_duration_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
		`absent(dnsconfigurer_dnsserver_synced)`,
		`label_values(dnsconfigurer_nodelocal_cache_hits_total{job=~"$job"}, type)`,
		`max by (pod, node) (kube_pod_info{namespace="x"}) unless on (pod) (kube_pod_status_ready{condition="true"} == 1)`,
		`up{pod=~"x-.*"} == 0`,
	}
	for _, q := range good {
		if err := checkExpr(comps, q, nil); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	cases := []struct {
		name, expr string
		printed    []string
		want       string
	}{
		{"unknown metric", `rate(dnsconfigurer_dnsserver_request_total[5m])`, nil, "not served"},
		{"unknown matcher label", `dnsconfigurer_nodelocal_cache_hits_total{qtype="A"}`, nil, `label "qtype"`},
		{"unknown grouping label", `sum by (upstream) (rate(dnsconfigurer_dnsserver_responses_total[5m]))`, nil, `"upstream"`},
		{"grouping dropped the label", `sum by (rcode) (sum by (zone) (dnsconfigurer_dnsserver_responses_total))`, nil, `"rcode"`},
		{"server value of no component", `dnsconfigurer_dnsserver_responses_total{server="node-local"}`, nil, "no component"},
		{"label of the other component", `dnsconfigurer_nodelocal_cache_hits_total{server="cluster"}`, nil, "not served"},
		{"value never seen", `dnsconfigurer_dnsserver_responses_total{server="nodelocal", rcode="SERVFAIL"}`, nil, `"SERVFAIL"`},
		{"quantile of a count", `histogram_quantile(0.9, rate(dnsconfigurer_dnsserver_request_duration_seconds_count[5m]))`, nil, "le"},
		{"annotation label", `sum by (zone) (rate(dnsconfigurer_dnsserver_responses_total[5m])) > 1`, []string{"upstream"}, `"upstream"`},
		{"label_values label", `label_values(dnsconfigurer_dnsserver_synced, zone)`, nil, `"zone"`},
		{"not PromQL", `sum by (zone (x)`, nil, "parse"},
		{"label of no external metric", `kube_pod_info{nodename="a"}`, nil, `"nodename" is not one of kube-state-metrics's`},
		{"unknown external metric", `kube_pod_status_phase{phase="Running"}`, nil, "nor of externalMetrics"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkExpr(comps, tc.expr, tc.printed)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkExpr(%s) = %v, want an error with %q", tc.expr, err, tc.want)
			}
		})
	}
}

// monitoringExpr is a query of deploy/monitoring, where it is, and the
// labels its alert's annotations print.
type monitoringExpr struct {
	where, expr string
	printed     []string
}

var labelRefRe = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// monitoringExprs reads the queries of the PrometheusRule (with the labels
// their annotations print) and of the dashboard (panel targets and
// template variables).
func monitoringExprs(t *testing.T) []monitoringExpr {
	t.Helper()
	var out []monitoringExpr
	rule := readRule(t)
	for _, g := range rule.Spec.Groups {
		for i, r := range g.Rules {
			var printed []string
			for _, a := range r.Annotations {
				for _, m := range labelRefRe.FindAllStringSubmatch(a, -1) {
					printed = append(printed, m[1])
				}
			}
			out = append(out, monitoringExpr{where: fmt.Sprintf("prometheusrule.yaml group %s rule %d (%s)", g.Name, i, r.Alert+r.Record), expr: r.Expr, printed: printed})
		}
	}
	data, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, monitoringExpr{where: fmt.Sprintf("dashboard.json panel %q target %s", p.Title, tg.RefID), expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("dashboard.json variable %s: query %s", v.Name, v.Query)
			}
		}
		out = append(out, monitoringExpr{where: "dashboard.json variable " + v.Name, expr: q.Query})
	}
	return out
}

type dashPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

func readRule(t *testing.T) prometheusRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return decode[prometheusRule](t, "prometheusrule.yaml", data)
}

// checkRuleFields: the groups load with Prometheus's rule parser
// (rulefmt, as Prometheus loads a rule file); every alert has a severity
// of warning or critical, a summary and a description, and a valid for;
// alerts of one name differ in severity.
func checkRuleFields(t *testing.T) {
	r := readRule(t)
	groups, err := yaml.Marshal(map[string]any{"groups": r.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := rulefmt.Parse(groups, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler)); len(errs) > 0 {
		t.Errorf("prometheusrule.yaml: Prometheus's rule parser: %v", errors.Join(errs...))
	}
	seen := map[string]bool{}
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				t.Errorf("group %s: a rule without alert (recording rules are not expected)", g.Name)
				continue
			}
			sev := rule.Labels["severity"]
			if sev != "warning" && sev != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", rule.Alert, sev)
			}
			if key := rule.Alert + "/" + sev; seen[key] {
				t.Errorf("alert %s: two rules of severity %s", rule.Alert, sev)
			} else {
				seen[key] = true
			}
			if rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("alert %s: no summary or description", rule.Alert)
			}
			if rule.For != "" {
				if _, err := model.ParseDuration(rule.For); err != nil {
					t.Errorf("alert %s: for %q: %v", rule.Alert, rule.For, err)
				}
			}
		}
	}
}

// checkRenderedMonitoring renders deploy/monitoring: the PrometheusRule and
// a ConfigMap labelled grafana_dashboard holding dashboard.json as it is.
func checkRenderedMonitoring(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not in PATH: deploy/monitoring not rendered")
		return
	}
	out, err := exec.Command(kubectl, "kustomize", monitoringDir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", monitoringDir, err)
	}
	dashboard, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rules, maps int
	for i, doc := range splitDocs(out) {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("rendered document %d: %v", i+1, err)
		}
		switch head.Kind {
		case "PrometheusRule":
			var r prometheusRule
			if err := yaml.UnmarshalStrict(doc, &r); err != nil {
				t.Errorf("rendered PrometheusRule: %v", err)
			}
			rules++
		case "ConfigMap":
			cm := decode[corev1.ConfigMap](t, "rendered ConfigMap", doc)
			if cm.Labels["grafana_dashboard"] != "1" || cm.Data["dashboard.json"] != string(dashboard) {
				t.Errorf("rendered ConfigMap %s: labels %v, dashboard.json %d bytes, want grafana_dashboard: \"1\" and the file's %d bytes",
					cm.Name, cm.Labels, len(cm.Data["dashboard.json"]), len(dashboard))
			}
			maps++
		default:
			t.Errorf("rendered document %d: unexpected kind %q", i+1, head.Kind)
		}
	}
	if rules != 1 || maps != 1 {
		t.Errorf("kubectl kustomize %s: %d PrometheusRules and %d ConfigMaps, want 1 and 1", monitoringDir, rules, maps)
	}
}

var labelValuesRe = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// grafanaVars replaces Grafana's interval variables by durations, so that
// a panel query parses as PromQL ($job and the like only occur inside
// label values).
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// checkExpr checks one query against what the components serve; printed
// are labels its result must have (the alert annotations' $labels).
func checkExpr(comps components, query string, printed []string) error {
	label := ""
	if m := labelValuesRe.FindStringSubmatch(query); m != nil { // a Grafana variable
		query, label = m[1], m[2]
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(query))
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	labels, err := exprLabels(comps, expr)
	if err != nil {
		return err
	}
	if label != "" {
		printed = append(printed, label)
	}
	for _, l := range printed {
		if !labels[l] {
			return fmt.Errorf("the result has no label %q (it has %v)", l, sortedKeys(labels))
		}
	}
	return nil
}

// exprLabels checks e and returns the labels its result series have (the
// target labels included).
func exprLabels(comps components, e parser.Expr) (map[string]bool, error) {
	switch e := e.(type) {
	case *parser.VectorSelector:
		return selectorLabels(comps, e)
	case *parser.MatrixSelector:
		return exprLabels(comps, e.VectorSelector)
	case *parser.SubqueryExpr:
		return exprLabels(comps, e.Expr)
	case *parser.ParenExpr:
		return exprLabels(comps, e.Expr)
	case *parser.UnaryExpr:
		return exprLabels(comps, e.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return map[string]bool{}, nil
	case *parser.AggregateExpr:
		in, err := exprLabels(comps, e.Expr)
		if err != nil {
			return nil, err
		}
		if e.Param != nil {
			if _, err := exprLabels(comps, e.Param); err != nil {
				return nil, err
			}
		}
		for _, l := range e.Grouping {
			if !in[l] {
				return nil, fmt.Errorf("%s by/without label %q: the series aggregated have %v", e.Op, l, sortedKeys(in))
			}
		}
		out := map[string]bool{}
		if e.Without {
			for l := range in {
				if !slices.Contains(e.Grouping, l) {
					out[l] = true
				}
			}
		} else {
			for _, l := range e.Grouping {
				out[l] = true
			}
		}
		return out, nil
	case *parser.Call:
		var args []map[string]bool
		for _, a := range e.Args {
			ls, err := exprLabels(comps, a)
			if err != nil {
				return nil, err
			}
			args = append(args, ls)
		}
		switch e.Func.Name {
		case "histogram_quantile":
			in := args[len(args)-1]
			if !in["le"] {
				return nil, fmt.Errorf("histogram_quantile of series without le (not a histogram's _bucket, or le aggregated away): %v", sortedKeys(in))
			}
			out := map[string]bool{}
			for l := range in {
				if l != "le" {
					out[l] = true
				}
			}
			return out, nil
		case "absent", "absent_over_time":
			// The result has the equality matchers' labels.
			out := map[string]bool{}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					for _, m := range vs.LabelMatchers {
						if m.Name != model.MetricNameLabel && m.Type.String() == "=" {
							out[m.Name] = true
						}
					}
				}
				return nil
			})
			return out, nil
		case "vector", "time", "scalar":
			return map[string]bool{}, nil
		}
		for i, a := range e.Args {
			if a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix {
				return args[i], nil
			}
		}
		return map[string]bool{}, nil
	case *parser.BinaryExpr:
		lhs, err := exprLabels(comps, e.LHS)
		if err != nil {
			return nil, err
		}
		rhs, err := exprLabels(comps, e.RHS)
		if err != nil {
			return nil, err
		}
		if vm := e.VectorMatching; vm != nil && e.LHS.Type() == parser.ValueTypeVector && e.RHS.Type() == parser.ValueTypeVector {
			for _, l := range vm.MatchingLabels {
				if vm.On && (!lhs[l] || !rhs[l]) {
					return nil, fmt.Errorf("on(%s): the sides have %v and %v", l, sortedKeys(lhs), sortedKeys(rhs))
				}
			}
			for _, l := range vm.Include {
				if vm.Card == parser.CardManyToOne && !rhs[l] || vm.Card == parser.CardOneToMany && !lhs[l] {
					return nil, fmt.Errorf("group_left/right(%s): not a label of the other side", l)
				}
			}
		}
		if e.LHS.Type() == parser.ValueTypeScalar {
			return rhs, nil
		}
		return lhs, nil
	}
	return nil, fmt.Errorf("unexpected expression %T: %s", e, e)
}

// selectorLabels checks a selector: its metric is served by a component
// (the one its server matcher names, if any) with every label it matches
// on, and each equality matcher's value was seen; it returns the labels of
// its series.
func selectorLabels(comps components, vs *parser.VectorSelector) (map[string]bool, error) {
	name := vs.Name
	server := ""
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && name == "" {
			name = m.Value
		}
		if m.Name == "server" && m.Type.String() == "=" {
			server = m.Value
		}
	}
	if ext, ok := externalMetrics[name]; ok {
		return externalLabels(vs, ext)
	}
	if !strings.HasPrefix(name, "dnsconfigurer_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
		return nil, fmt.Errorf("metric %q: not one of dnsconfigurer's (dnsconfigurer_*, go_*, process_*) nor of externalMetrics", name)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for c := range comps {
			if !yield(c) {
				return
			}
		}
	})
	if server != "" {
		if _, ok := comps[server]; !ok {
			return nil, fmt.Errorf("%s{server=%q}: no component is server %q (components: %v)", name, server, server, names)
		}
		names = []string{server}
	}
	var reasons []string
	for _, c := range names {
		labels, ok := comps[c][name]
		if !ok {
			reasons = append(reasons, fmt.Sprintf("%s: not served", c))
			continue
		}
		var missing []string
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel || slices.Contains(targetLabels, m.Name) {
				continue
			}
			values, ok := labels[m.Name]
			if !ok {
				missing = append(missing, fmt.Sprintf("label %q", m.Name))
				continue
			}
			if m.Type.String() == "=" && m.Value != "" && !values[m.Value] {
				missing = append(missing, fmt.Sprintf("%s=%q never seen (seen: %v)", m.Name, m.Value, sortedKeys(values)))
			}
		}
		if len(missing) > 0 {
			reasons = append(reasons, fmt.Sprintf("%s: %s", c, strings.Join(missing, ", ")))
			continue
		}
		out := map[string]bool{}
		for l := range labels {
			out[l] = true
		}
		for _, l := range targetLabels {
			out[l] = true
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: %s", vs, strings.Join(reasons, "; "))
}

// externalMetric is a series the rules use that no dnsconfigurer
// component serves: who makes it, and its labels.
type externalMetric struct {
	source string
	labels []string
}

// externalMetrics are the series of others the rules use. The node
// agent's and the node-local stage's pods are watched through
// kube-state-metrics (v2; the agent serves its metrics on the node's
// loopback only, so no Prometheus scrapes it), and a failing scrape
// through Prometheus's own up.
var externalMetrics = map[string]externalMetric{
	"up":                    {"Prometheus (every scrape target)", nil},
	"kube_pod_info":         {"kube-state-metrics", []string{"namespace", "pod", "uid", "host_ip", "pod_ip", "node", "created_by_kind", "created_by_name", "priority_class", "host_network"}},
	"kube_pod_status_ready": {"kube-state-metrics", []string{"namespace", "pod", "uid", "condition"}},
	"kube_daemonset_status_number_unavailable": {"kube-state-metrics", []string{"namespace", "daemonset"}},
}

// externalLabels checks a selector of an external metric against its
// known labels (and the target labels) and returns them.
func externalLabels(vs *parser.VectorSelector, ext externalMetric) (map[string]bool, error) {
	out := map[string]bool{}
	for _, l := range ext.labels {
		out[l] = true
	}
	for _, l := range targetLabels {
		out[l] = true
	}
	for _, m := range vs.LabelMatchers {
		if m.Name != model.MetricNameLabel && !out[m.Name] {
			return nil, fmt.Errorf("%s: label %q is not one of %s's %v", vs, m.Name, ext.source, ext.labels)
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scrapeComponents runs the cluster DNS and the node-local stage, sends
// them queries and returns what their /metrics serve.
func scrapeComponents(t *testing.T, extra ...string) components {
	t.Helper()
	cluster, nodeLocal := startComponents(t, extra...)
	for round := range 3 { // node-local answers the third round's cached names from their wire form
		sendQueries(t, round, cluster, nodeLocal)
	}
	waitHealthFailures(t, cluster, nodeLocal)
	comps := components{}
	for _, s := range []*serveProcess{cluster, nodeLocal} {
		got, err := scrape(s.metrics)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		comps[s.name] = got
	}
	comps["webhook"] = scrapeWebhook(t)
	if hits := comps["nodelocal"]["dnsconfigurer_nodelocal_cache_hits_total"]; hits == nil {
		t.Fatal("node-local counted no cache hit")
	}
	return comps
}

// startComponents runs the cluster DNS (the records of examples/objects,
// a stub upstream for ".", and the stub domain dead.test whose upstream
// is down) and the node-local stage in front of it (and of a cluster DNS
// address that is down), both with the flags extra.
func startComponents(t *testing.T, extra ...string) (cluster, nodeLocal *serveProcess) {
	t.Helper()
	buildbin.Dnsconfigurer(t) // built, or the test skipped, before the stub starts
	upstream := startStubUpstream(t)
	dead := testkit.RefusedAddr(t)
	cluster = startServe(t, "cluster", append([]string{"--objects", "../../examples/objects",
		"--forward", ".=" + upstream, "--forward", "dead.test=" + dead}, extra...)...)
	// A second cluster upstream that is down: node-local asks the live one
	// after it and probes it, as the cluster DNS does dead.test's.
	nodeLocal = startServe(t, "nodelocal", append([]string{"--mode", "node-local", "--cluster-upstream", cluster.dns + "," + testkit.RefusedAddr(t),
		"--resolv-conf", ""}, extra...)...)
	return cluster, nodeLocal
}

// sendQueries sends each component a round of queries over UDP and TCP:
// cluster names, forwarded and cached ones, a denial, the upstream's
// SERVFAIL and a stub domain whose upstream is down.
func sendQueries(t *testing.T, round int, procs ...*serveProcess) {
	t.Helper()
	type query struct {
		name  string
		qtype uint16
		rcode int
		do    bool
	}
	queries := []query{
		{"web.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, false},
		{"web.prod.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, true}, // DNSSEC OK
		{"nosuch.prod.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, false},
		{"www.example.com.", dns.TypeA, dns.RcodeSuccess, false},            // forwarded, then cached
		{"nx.example.com.", dns.TypeA, dns.RcodeNameError, false},           // a cached denial
		{"servfail.example.com.", dns.TypeA, dns.RcodeServerFailure, false}, // the upstream's SERVFAIL
		{"x.dead.test.", dns.TypeA, dns.RcodeServerFailure, false},          // no upstream answers
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR, -1, false},
	}
	for _, s := range procs {
		for _, network := range []string{"udp", "tcp"} {
			for _, q := range queries {
				m := new(dns.Msg).SetQuestion(q.name, q.qtype)
				m.SetEdns0(1232, q.do)
				r, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second}).Exchange(m, s.dns)
				if err != nil {
					t.Fatalf("%s round %d: %s %s over %s: %v", s.name, round, q.name, dns.TypeToString[q.qtype], network, err)
				}
				if q.rcode >= 0 && r.Rcode != q.rcode {
					t.Fatalf("%s: %s %s over %s: %s, want %s", s.name, q.name, dns.TypeToString[q.qtype], network, dns.RcodeToString[r.Rcode], dns.RcodeToString[q.rcode])
				}
			}
		}
	}
}

// waitHealthFailures waits until each component counts failed health
// probes: an upstream that is down is marked so after its first failures,
// and its probes then fail every half second.
func waitHealthFailures(t *testing.T, procs ...*serveProcess) {
	t.Helper()
	for _, s := range procs {
		testkit.WaitFor(t, 20*time.Second, func() error {
			got, err := scrape(s.metrics)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if _, ok := got["dnsconfigurer_forward_healthcheck_failures_total"]; !ok {
				return fmt.Errorf("%s: no dnsconfigurer_forward_healthcheck_failures_total for the down upstream", s.name)
			}
			return nil
		})
	}
}

// scrapeWebhook runs `dnsconfigurer webhook` with a certificate of a
// test CA and returns what its /metrics serve.
func scrapeWebhook(t *testing.T) served {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM, keyPEM, _ := testkit.NewCA(t).Serving(t, "dnsconfigurer-webhook")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t, "127.0.0.1")
	cmd := exec.Command(buildbin.Dnsconfigurer(t), "webhook", "--tls-cert-file", cert, "--tls-private-key-file", key, "--listen", addr)
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { buildbin.Terminate(cmd.Process, exited, 10*time.Second) })
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var got served
	testkit.WaitFor(t, 20*time.Second, func() error {
		resp, err := client.Get("https://" + addr + "/metrics")
		if err != nil {
			return fmt.Errorf("webhook: %v\n%s", err, out.String())
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		got, err = parseServed(body)
		return err
	})
	return got
}

// serveProcess is a running `dnsconfigurer serve`.
type serveProcess struct {
	name, dns, metrics string
}

// startServe runs `dnsconfigurer serve` on 127.0.0.1 with args and waits
// until it is ready (the cluster DNS once its records are loaded).
func startServe(t *testing.T, name string, args ...string) *serveProcess {
	t.Helper()
	s := buildbin.StartServeArgs(t, "127.0.0.1:0", args...)
	testkit.WaitFor(t, 20*time.Second, func() error { return testkit.GetOK(nil, "http://"+s.Metrics+"/readyz") })
	return &serveProcess{name: name, dns: s.DNS, metrics: s.Metrics}
}

// scrape reads a /metrics page: each series name (a histogram's _bucket,
// _sum and _count) with its labels and their values.
func scrape(addr string) (served, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseServed(body)
}

// parseServed reads a /metrics page (scrape).
func parseServed(body []byte) (served, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	out := served{}
	add := func(name string, m *dto.Metric, extra ...string) {
		labels := out[name]
		if labels == nil {
			labels = map[string]map[string]bool{}
			out[name] = labels
		}
		for _, lp := range m.GetLabel() {
			if labels[lp.GetName()] == nil {
				labels[lp.GetName()] = map[string]bool{}
			}
			labels[lp.GetName()][lp.GetValue()] = true
		}
		for _, l := range extra {
			if labels[l] == nil {
				labels[l] = map[string]bool{}
			}
		}
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out, nil
}

// startStubUpstream answers every A query with 192.0.2.1, NXDOMAIN for
// names starting with "nx." and SERVFAIL for those starting with
// "servfail.", over UDP and TCP on 127.0.0.1.
func startStubUpstream(t *testing.T) string {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, m *dns.Msg) {
		switch {
		case strings.HasPrefix(q.Name, "nx."):
			m.Rcode = dns.RcodeNameError
		case strings.HasPrefix(q.Name, "servfail."):
			m.Rcode = dns.RcodeServerFailure
		case q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{testkit.A(q.Name, 60, "192.0.2.1")}
		}
	})).Addr
}
