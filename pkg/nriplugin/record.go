package nriplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/containerd/nri/pkg/api"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// recordName is the file, next to a followed pod's resolv.conf, that
// holds the engine input the plugin follows the pod with: a restarted
// plugin reads it back at Synchronize.
const recordName = "pod.json"

// recordVersion is the version of the record's format.
const recordVersion = 1

// podRecord is the record's JSON. Its fields are policy.Input's, under
// names of their own so that a change of the Go type does not change the
// file.
type podRecord struct {
	Version   int         `json:"version"`
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	UID       string      `json:"uid"`
	Input     recordInput `json:"input"`
}

type recordInput struct {
	Policy            policy.Policy    `json:"policy"`
	PolicyAnnotation  string           `json:"policyAnnotation,omitempty"`
	NamespacePolicy   string           `json:"namespacePolicy,omitempty"`
	HostNetwork       bool             `json:"hostNetwork,omitempty"`
	DNSConfig         *recordDNSConfig `json:"dnsConfig,omitempty"`
	Hostname          string           `json:"hostname,omitempty"`
	Subdomain         string           `json:"subdomain,omitempty"`
	HostnameOverride  *string          `json:"hostnameOverride,omitempty"`
	SetHostnameAsFQDN bool             `json:"setHostnameAsFQDN,omitempty"`
}

type recordDNSConfig struct {
	Nameservers []string       `json:"nameservers,omitempty"`
	Searches    []string       `json:"searches,omitempty"`
	Options     []recordOption `json:"options,omitempty"`
}

type recordOption struct {
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"`
}

// newRecord is the record of pod's input in.
func newRecord(pod *api.PodSandbox, in policy.Input) podRecord {
	r := podRecord{Version: recordVersion, Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUid(),
		Input: recordInput{Policy: in.Policy, PolicyAnnotation: in.PolicyAnnotation, NamespacePolicy: in.NamespacePolicy,
			HostNetwork: in.HostNetwork, Hostname: in.Hostname, Subdomain: in.Subdomain,
			HostnameOverride: in.HostnameOverride, SetHostnameAsFQDN: in.SetHostnameAsFQDN}}
	if c := in.DNSConfig; c != nil {
		r.Input.DNSConfig = &recordDNSConfig{Nameservers: c.Nameservers, Searches: c.Searches}
		for _, o := range c.Options {
			r.Input.DNSConfig.Options = append(r.Input.DNSConfig.Options, recordOption(o))
		}
	}
	return r
}

// input is the engine input the record holds.
func (r podRecord) input() policy.Input {
	ri := r.Input
	in := policy.Input{Name: r.Name, Namespace: r.Namespace, UID: r.UID,
		Policy: ri.Policy, PolicyAnnotation: ri.PolicyAnnotation, NamespacePolicy: ri.NamespacePolicy,
		HostNetwork: ri.HostNetwork, Hostname: ri.Hostname, Subdomain: ri.Subdomain,
		HostnameOverride: ri.HostnameOverride, SetHostnameAsFQDN: ri.SetHostnameAsFQDN}
	if c := ri.DNSConfig; c != nil {
		in.DNSConfig = &policy.DNSConfig{Nameservers: c.Nameservers, Searches: c.Searches}
		for _, o := range c.Options {
			in.DNSConfig.Options = append(in.DNSConfig.Options, policy.Option(o))
		}
	}
	return in
}

// saveRecord writes the record of pod's input in dir, unless the same is
// there, or removes it when the pod is not followed.
func saveRecord(dir string, pod *api.PodSandbox, in policy.Input, follow bool) error {
	path := filepath.Join(dir, recordName)
	if !follow {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pod record: %w", err)
		}
		return nil
	}
	data, err := json.Marshal(newRecord(pod, in))
	if err != nil {
		return fmt.Errorf("pod record: %w", err)
	}
	data = append(data, '\n')
	if old, err := readStateFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return writeAtomic(dir, path, data, recordMode)
}

// loadRecord reads back the input of pod from the record in dir. A record
// of another pod, of another version or with fields it does not know is
// an error.
func loadRecord(dir string, pod *api.PodSandbox) (policy.Input, error) {
	path := filepath.Join(dir, recordName)
	data, err := readStateFile(path)
	if err != nil {
		return policy.Input{}, fmt.Errorf("pod record: %w", err)
	}
	var r podRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return policy.Input{}, fmt.Errorf("pod record %q: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return policy.Input{}, fmt.Errorf("pod record %q: data after the record", path)
	}
	switch {
	case r.Version != recordVersion:
		return policy.Input{}, fmt.Errorf("pod record %q: version %d, want %d", path, r.Version, recordVersion)
	case r.UID != pod.GetUid() || r.Namespace != pod.GetNamespace() || r.Name != pod.GetName():
		return policy.Input{}, fmt.Errorf("pod record %q: for pod %q (uid %q), not %q (uid %q)", path,
			r.Namespace+"/"+r.Name, r.UID, podName(pod), pod.GetUid())
	}
	return r.input(), nil
}

// recoverRecords follows again, from their records, the live pods of
// pods not followed yet, up to the max pods; p.mu must be held. It
// returns how many it recovered.
func (p *Plugin) recoverRecords(pods []*api.PodSandbox) int {
	byUID := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		byUID[pod.GetUid()] = pod
	}
	uids := make([]string, 0, len(byUID))
	for uid := range byUID {
		if _, ok := p.running[uid]; !ok && validUID(uid) == nil {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	n := 0
	for _, uid := range uids {
		pod := byUID[uid]
		in, err := loadRecord(filepath.Join(p.stateDir, uid), pod)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not followed, or written by a version without records
		}
		log := p.log.With("pod", podName(pod), "uid", uid)
		if err != nil {
			p.m.errors.WithLabelValues(stageUpdate).Inc()
			log.Error("pod record unusable; the pod's file follows node resolver changes again at its next container", "error", err)
			continue
		}
		if len(p.running) >= p.maxPods {
			log.Warn("too many pods to follow; this pod's file will not follow node resolver changes", "max", p.maxPods)
			continue
		}
		p.running[uid] = podFacts{pod: &api.PodSandbox{Namespace: pod.GetNamespace(), Name: pod.GetName(), Uid: uid}, in: in}
		n++
	}
	return n
}
