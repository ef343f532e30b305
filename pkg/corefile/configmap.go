package corefile

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// MountDir is where deploy/ mounts the cluster DNS's ConfigMap
// (dnsconfigurer-dns) in its pod, as a directory: each key is a file there
// (deploy/dnsserver/deployment.yaml, which overlays/replace-coredns reuses,
// and the chart's dnsserver.yaml, whose dns.files are such keys).
const MountDir = "/etc/dnsconfigurer"

// ConfigKey is the key of the ServerConfiguration in that ConfigMap; serve
// runs with --config MountDir/ConfigKey.
const ConfigKey = "config.yaml"

// ConfigMapKeys are the keys of the ConfigMap a Corefile came in.
type ConfigMapKeys struct {
	// Data is the ConfigMap's data, Corefile included.
	Data map[string]string
	// Carry is set when the output is a ConfigMap (convert --configmap) or
	// the chart's values (--helm-values): a hosts file that is one of
	// Data's keys is then carried in it, under the same key (dns.files),
	// and hosts.file becomes MountDir/KEY.
	Carry bool
	// Helm: the output is the chart's values; the report and the errors
	// name dns.files, not the output ConfigMap.
	Helm bool
	// CheckKey is Kubernetes' rule for a ConfigMap key: what is wrong
	// with key, nothing when it is valid. Carry needs it. The command
	// passes apimachinery's validation.IsConfigMapKey, which this pure
	// package does not import (internal/layering).
	CheckKey func(key string) []string
}

// into names where a carried key goes.
func (k *ConfigMapKeys) into(key string) string {
	if k.Helm {
		return "dns.files." + key
	}
	return "the output ConfigMap"
}

// key returns the ConfigMap key a hosts file path names, if any.
func (k *ConfigMapKeys) key(file string) (string, bool) {
	if k == nil || file == "" {
		return "", false
	}
	base := path.Base(file)
	_, ok := k.Data[base]
	return base, ok
}

// carryHosts carries the hosts file that is the ConfigMap key key into
// r.Files and points hosts.file at its place in the dnsconfigurer pod; the
// finding that names the file says so.
func carryHosts(r *Result, k *ConfigMapKeys, key string) error {
	from := r.Config.Hosts.File
	if k.CheckKey == nil {
		return fmt.Errorf("hosts file %s: ConfigMap key %q: no key check to carry it (ConfigMapKeys.CheckKey)", from, key)
	}
	if errs := k.CheckKey(key); len(errs) > 0 {
		return fmt.Errorf("hosts file %s: ConfigMap key %q cannot be carried in %s: %s", from, key, k.into(key), strings.Join(errs, "; "))
	}
	if key == ConfigKey {
		return fmt.Errorf("hosts file %s: ConfigMap key %q cannot be carried in %s: the converted ServerConfiguration is its key %s; rename the key (and the Corefile's hosts line)", from, key, k.into(key), ConfigKey)
	}
	to := path.Join(MountDir, key)
	r.Config.Hosts.File = to
	r.Files = map[string]string{key: k.Data[key]}
	named := false
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Plugin != "hosts" || !strings.HasPrefix(f.Reason, "hosts.file "+from) {
			continue
		}
		rest := strings.TrimPrefix(f.Reason, "hosts.file "+from)
		if named || f.Status != Converted {
			// The same file in another block.
			f.Reason = "hosts.file " + to + rest
			continue
		}
		f.Reason = fmt.Sprintf("hosts.file %s%s; %s was the ConfigMap key %s: %s carries it, mounted at %s (edit it there from now on)",
			to, rest, from, key, k.into(key), to)
		named = true
	}
	if !named {
		return fmt.Errorf("hosts file %s: no finding names it", from)
	}
	return nil
}

// ConfigMap is the ConfigMap `convert --configmap` writes: the
// ServerConfiguration (config, with its header) under ConfigKey, and the
// files the conversion carries (Result.Files) under their keys.
func (r Result) ConfigMap(name, namespace, config string) ([]byte, error) {
	type meta struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	cm := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   meta              `json:"metadata"`
		Data       map[string]string `json:"data"`
	}{APIVersion: "v1", Kind: "ConfigMap", Metadata: meta{name, namespace}, Data: map[string]string{ConfigKey: config}}
	for _, k := range slices.Sorted(maps.Keys(r.Files)) {
		if _, dup := cm.Data[k]; dup {
			return nil, fmt.Errorf("configmap key %q: used twice", k)
		}
		cm.Data[k] = r.Files[k]
	}
	b, err := yaml.Marshal(cm)
	if err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return b, nil
}

// HelmValues are the values of charts/dnsconfigurer `convert --helm-values`
// writes: the ServerConfiguration (config, with its header) as dns.config
// and the carried files as dns.files. The chart makes both keys of
// ConfigMap dnsconfigurer-dns, mounted at MountDir.
func (r Result) HelmValues(config string) ([]byte, error) {
	type dns struct {
		Config string            `json:"config"`
		Files  map[string]string `json:"files,omitempty"`
	}
	if _, dup := r.Files[ConfigKey]; dup {
		return nil, fmt.Errorf("dns.files key %q: the key of dns.config", ConfigKey)
	}
	b, err := yaml.Marshal(struct {
		DNS dns `json:"dns"`
	}{dns{Config: config, Files: r.Files}})
	if err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return b, nil
}
