package corefile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// configMap is the part of a ConfigMap the conversion reads.
type configMap struct {
	Kind string            `json:"kind"`
	Data map[string]string `json:"data"`
}

// ConfigMapData returns the data of a ConfigMap manifest; ok is false when
// text is not one (a Corefile).
func ConfigMapData(text []byte) (data map[string]string, ok bool, err error) {
	var cm configMap
	if yaml.Unmarshal(text, &cm) != nil || cm.Kind != "ConfigMap" {
		return nil, false, nil
	}
	if len(cm.Data) == 0 {
		return nil, true, fmt.Errorf("configmap: no data")
	}
	return cm.Data, true, nil
}

// IsKubeDNS reports a kube-dns ConfigMap: no Corefile key.
func IsKubeDNS(data map[string]string) bool {
	_, ok := data["Corefile"]
	return !ok
}

// Run parses and converts a Corefile. keys are the ConfigMap it came in
// (nil for a file). A hosts file named after one of its keys is carried in
// the output ConfigMap when keys.Carry is set (Result.Files), else it gets
// a finding: the operator mounts it. It stops with ctx's error when ctx
// ends.
func Run(ctx context.Context, in Input, keys *ConfigMapKeys) (Result, error) {
	blocks, imports, err := Parse(ctx, in)
	if err != nil {
		return Result{}, err
	}
	r, c := convert(blocks)
	if r.refused != nil {
		return Result{}, r.refused
	}
	r.Findings = append(imports, r.Findings...)
	if key, ok := keys.key(r.Config.Hosts.File); ok {
		if keys.Carry {
			if err := carryHosts(&r, keys, key); err != nil {
				return Result{}, fmt.Errorf("%s: %w", hostsWhere(r.Findings, in.Name+":1"), err)
			}
		} else {
			r.Findings = append(r.Findings, Finding{Where: hostsWhere(r.Findings, in.Name), Plugin: "hosts", Status: Differs,
				Reason: fmt.Sprintf("%s is the ConfigMap key %s: mount it there in the dnsconfigurer pod", r.Config.Hosts.File, key)})
		}
	}
	sort.SliceStable(r.Findings, func(i, j int) bool {
		return lessWhere(r.Findings[i].Where, r.Findings[j].Where, in.Name)
	})
	r.Findings = merge(r.Findings)
	return r, check(r.Config, c.fieldWhere(in.Name))
}

// hostsWhere is where the hosts file was named: its finding's place, else
// the Corefile's name.
func hostsWhere(fs []Finding, name string) string {
	where := name
	for _, x := range fs {
		if x.Plugin == "hosts" && strings.Contains(x.Reason, "hosts.file") {
			where = x.Where
		}
	}
	return where
}

// check validates a copy of cfg with the defaults filled in: a value
// CoreDNS accepts but serve does not (a duration without a unit, a
// policy) is an error of the input, one per field, each at the place
// at gives for its field (the directive that set it).
func check(cfg v1alpha1.ServerConfiguration, at func(field string) string) error {
	c, err := cfg.Copy()
	if err != nil {
		return err
	}
	c.SetDefaults()
	err = c.Validate()
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		field, _, _ := strings.Cut(e.Error(), ": ")
		out[i] = fmt.Errorf("%s: %w (serve's configuration refuses it)", at(field), e)
	}
	return errors.Join(out...)
}

// fieldPlugins are the plugins that set each ServerConfiguration field
// (its first name) convert fills.
var fieldPlugins = map[string]string{
	"forward": "forward", "maxConcurrent": "forward", "failFastAllUnhealthy": "forward",
	"cache": "cache", "hosts": "hosts", "overrides": "hosts", "rewrites": "rewrite", "templates": "template",
	"clusterDomain": "kubernetes", "pods": "kubernetes", "ttl": "kubernetes", "namespaces": "kubernetes",
	"kubeconfig": "kubernetes", "reverseZones": "kubernetes", "reverseScope": "kubernetes", "external": "k8s_external", "lameduck": "health", "metricsListen": "prometheus",
	"listen": "bind", "logQueries": "log", "autopathBySource": "autopath", "nodeLocal": "bind",
}

// fieldWhere is where the field a validation error names was set: the
// directive of its list entry (forward[1], rewrites[0]), else the first
// of its plugin, else the root zone's block, else name's first line.
func (c *converter) fieldWhere(name string) func(string) string {
	return func(field string) string {
		entry, _, _ := strings.Cut(field, ".")
		if w := c.entryAt[entry]; w != "" {
			return w
		}
		root, _, _ := strings.Cut(entry, "[")
		for _, f := range c.out {
			if f.Plugin == fieldPlugins[root] {
				return f.Where
			}
		}
		if c.main != "" {
			return c.main
		}
		return name + ":1"
	}
}
