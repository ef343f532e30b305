package v1alpha1

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// WebhookKind is the kind of the admission webhook's config file.
const WebhookKind = "WebhookConfiguration"

// Trims settings: what the webhook does with a pod that kubelet would start
// but silently trim (more than 3 nameservers, or a search list over 32
// entries or 2048 characters, after the merge with the node's DNS).
const (
	TrimsWarn = "warn" // allow, with one AdmissionResponse warning per trim
	// TrimsDeny denies like a hard failure, except a trim the pod cannot
	// avoid (it sets no entries of that kind; the node's settings alone pass
	// the limit), which stays a warning.
	TrimsDeny = "deny"
)

// Workloads settings: whether the webhook checks the pod templates of
// Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
// PodTemplates and ReplicationControllers.
const (
	WorkloadsCheck = "check" // check them as pods, on their field paths
	// WorkloadsSkip allows them unchecked, with no warning: pods are still
	// checked when their controller creates them. Remove the workload
	// entries of the ValidatingWebhookConfiguration too, so the API server
	// does not call the webhook for them at all.
	WorkloadsSkip = "skip"
)

// Webhook defaults.
const (
	DefaultWebhookListen = ":8443"
	DefaultTrims         = TrimsWarn
	DefaultWorkloads     = WorkloadsCheck
	// DefaultMaxRequestBytes caps an AdmissionReview body: twice the API
	// server's 3 MiB request limit, since the review wraps the object.
	DefaultMaxRequestBytes = 6 << 20
	DefaultReadTimeout     = 10 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	// DefaultBodyProgressTimeout gives each 64 KiB of a request body 2 s
	// (at least 32 KiB/s): the API server sends a review at network speed,
	// and a client trickling a body is cut off long before readTimeout.
	DefaultBodyProgressTimeout = 2 * time.Second
)

// WebhookConfiguration is the config file of `dnsconfigurer webhook`:
//
//	apiVersion: dnsconfigurer.io/v1alpha1
//	kind: WebhookConfiguration
//	listen: ":8443"
//	tlsCertFile: /etc/dnsconfigurer/tls/tls.crt
//	tlsPrivateKeyFile: /etc/dnsconfigurer/tls/tls.key
//	bodyProgressTimeout: 2s    # each 64 KiB of a body within this
//	clientCAFile: /etc/dnsconfigurer/client-ca/ca.crt   # optional
//	trims: warn
//	defaultDNSPolicy: ClusterFirstWithAutopath   # as the node agents'
//	ndots: 2
//	cluster:
//	  clusterDNS: [10.96.0.10]
//	  clusterDomain: cluster.local
//	nodeResolver:
//	  nameservers: [10.0.0.2]
//	  searches: [ec2.internal]
//	nodePools:
//	- name: windows
//	  nodeSelector: {kubernetes.io/os: windows}
//	  nodeOS: windows
//	  nodeResolver: {nameservers: [10.0.0.2], searches: [corp.example]}
//
// # Node pools
//
// The webhook cannot read the nodes' resolv.conf, so it assumes one:
// nodeResolver for every node, or a pool's own for the nodes of that pool. A
// pod belongs to every pool whose nodeSelector labels all appear, with the
// same values, in the pod's spec.nodeSelector. A pod that belongs to no pool
// is checked against the top-level settings; a pod that belongs to several
// is checked against each and must pass all of them. Node affinity and
// tolerations are not considered.
type WebhookConfiguration struct {
	TypeMeta `json:",inline"`

	// Listen is the HTTPS address (default ":8443"). There is no plain HTTP.
	Listen string `json:"listen,omitempty"`
	// TLSCertFile and TLSPrivateKeyFile are the serving certificate (with
	// its chain) and key, PEM. Both are required, here or as flags; they are
	// re-read when the files change.
	TLSCertFile       string `json:"tlsCertFile,omitempty"`
	TLSPrivateKeyFile string `json:"tlsPrivateKeyFile,omitempty"`
	// MaxRequestBytes caps a request body (default 6 MiB).
	MaxRequestBytes int64 `json:"maxRequestBytes,omitempty"`
	// ReadTimeout and WriteTimeout bound reading a request and writing its
	// response, as Go durations (default "10s" each; the API server waits
	// at most the webhook's timeoutSeconds anyway).
	ReadTimeout  string `json:"readTimeout,omitempty"`
	WriteTimeout string `json:"writeTimeout,omitempty"`
	// BodyProgressTimeout is the time each 64 KiB of a request body (all
	// of a shorter body) has to arrive, as a Go duration (default "2s");
	// the whole body must still arrive within readTimeout. A slower body
	// is answered 408 and gives back the bytes it took from the in-flight
	// budget.
	BodyProgressTimeout string `json:"bodyProgressTimeout,omitempty"`
	// ClientCAFile, when set, is a PEM bundle of CAs. /validate then
	// answers only clients with a certificate one of them signed, and 403
	// before reading the body otherwise. Such a client is the API server,
	// given a client certificate for the webhook in its admission control
	// config. /healthz, /readyz and /metrics need no certificate. Read at
	// start.
	ClientCAFile string `json:"clientCAFile,omitempty"`
	// Trims is "warn" (default) or "deny".
	Trims string `json:"trims,omitempty"`
	// Workloads is "check" (default) or "skip": whether the pod templates
	// of workloads are checked at admission.
	Workloads string `json:"workloads,omitempty"`
	// PodPolicy is the node agents' policy for pods that did not choose:
	// an allowed pod gets a warning saying what it will get under it. The
	// webhook does not read namespaces (the AdmissionReview does not carry
	// their labels): with namespaceLabels the warning says that a label on
	// the namespace may change the outcome.
	PodPolicy `json:",inline"`

	// Cluster is kubelet's DNS settings, the same on every node. Its
	// resolvConf must stay unset: the nodes' resolver config is given by
	// NodeResolver.
	Cluster NodeDNS `json:"cluster"`
	// NodeResolver is the resolv.conf content assumed on nodes outside every
	// node pool.
	NodeResolver NodeResolver `json:"nodeResolver"`
	// NodePools are groups of nodes with their own resolver config or OS.
	NodePools []NodePool `json:"nodePools,omitempty"`
}

// NodeResolver is what the nodes' resolv.conf (kubelet resolvConf) holds.
// Entries are read as kubelet reads the file: a trailing dot is trimmed from
// each search domain and a lone "." is dropped.
type NodeResolver struct {
	// Disabled is kubelet's resolvConf "": host-type pods get 127.0.0.1 and
	// the search list ".". It excludes the three lists.
	Disabled    bool     `json:"disabled,omitempty"`
	Nameservers []string `json:"nameservers,omitempty"`
	Searches    []string `json:"searches,omitempty"`
	// Options are resolv.conf options such as "ndots:2" or "edns0".
	Options []string `json:"options,omitempty"`
}

// NodePool is a group of nodes, selected by labels, with DNS settings that
// differ from the top level.
type NodePool struct {
	// Name is a DNS label naming the pool in messages.
	Name string `json:"name"`
	// NodeSelector are the labels the pool's nodes carry; a pod whose
	// spec.nodeSelector holds all of them belongs to the pool.
	NodeSelector map[string]string `json:"nodeSelector"`
	// NodeResolver replaces the top-level one when set.
	NodeResolver *NodeResolver `json:"nodeResolver,omitempty"`
	// NodeOS replaces cluster.nodeOS when set.
	NodeOS string `json:"nodeOS,omitempty"`
	// NodeLocalDNS replaces cluster.nodeLocalDNS when set.
	NodeLocalDNS []string `json:"nodeLocalDNS,omitempty"`
}

// SetDefaults fills unset fields.
func (w *WebhookConfiguration) SetDefaults() {
	if w.Listen == "" {
		w.Listen = DefaultWebhookListen
	}
	if w.MaxRequestBytes == 0 {
		w.MaxRequestBytes = DefaultMaxRequestBytes
	}
	setString(&w.ReadTimeout, DefaultReadTimeout.String())
	setString(&w.WriteTimeout, DefaultWriteTimeout.String())
	setString(&w.BodyProgressTimeout, DefaultBodyProgressTimeout.String())
	setString(&w.Trims, DefaultTrims)
	setString(&w.Workloads, DefaultWorkloads)
	w.PodPolicy.SetDefaults()
	// NodeDNS defaults resolvConf to a file the webhook must not read.
	rc := w.Cluster.ResolvConf
	w.Cluster.SetDefaults()
	w.Cluster.ResolvConf = rc
}

// Validate reports the first invalid field by its path. It does not require
// the TLS files, which may come from flags: CheckComplete does.
func (w *WebhookConfiguration) Validate() error {
	if w.Cluster.ResolvConf != nil {
		return fmt.Errorf("cluster.resolvConf: not used by the webhook, which cannot read the nodes' files; give their content in nodeResolver")
	}
	if err := w.Cluster.Validate("cluster."); err != nil {
		return err
	}
	if err := w.PodPolicy.Validate(""); err != nil {
		return err
	}
	if _, port, err := net.SplitHostPort(w.Listen); err != nil || port == "" {
		return fmt.Errorf("listen: %q is not an address such as \":8443\" or \"127.0.0.1:8443\"", w.Listen)
	}
	if (w.TLSCertFile == "") != (w.TLSPrivateKeyFile == "") {
		return fmt.Errorf("tlsCertFile and tlsPrivateKeyFile: give both or neither")
	}
	if w.MaxRequestBytes < 4<<10 {
		return fmt.Errorf("maxRequestBytes: %d is too small to hold an AdmissionReview (at least 4096)", w.MaxRequestBytes)
	}
	for _, d := range []struct{ name, val string }{{"readTimeout", w.ReadTimeout}, {"writeTimeout", w.WriteTimeout},
		{"bodyProgressTimeout", w.BodyProgressTimeout}} {
		v, err := time.ParseDuration(d.val)
		if err != nil || v <= 0 {
			return fmt.Errorf("%s: %q is not a positive duration such as \"10s\"", d.name, d.val)
		}
	}
	if err := either("trims", w.Trims, TrimsWarn, TrimsDeny); err != nil {
		return err
	}
	if err := either("workloads", w.Workloads, WorkloadsCheck, WorkloadsSkip); err != nil {
		return err
	}
	if err := w.NodeResolver.Validate("nodeResolver."); err != nil {
		return err
	}
	names := map[string]bool{}
	for i, p := range w.NodePools {
		prefix := fmt.Sprintf("nodePools[%d].", i)
		if !IsDNSLabel(p.Name) {
			return fmt.Errorf("%sname: %q must be a DNS label (lowercase letters, digits and '-', at most 63)", prefix, p.Name)
		}
		if names[p.Name] {
			return fmt.Errorf("%sname: %q is used twice", prefix, p.Name)
		}
		names[p.Name] = true
		if len(p.NodeSelector) == 0 {
			return fmt.Errorf("%snodeSelector: required: a pool without labels would hold every pod", prefix)
		}
		for k := range p.NodeSelector {
			if k == "" || strings.ContainsAny(k, " \t") {
				return fmt.Errorf("%snodeSelector: %q is not a label key", prefix, k)
			}
		}
		if p.NodeResolver != nil {
			if err := p.NodeResolver.Validate(prefix + "nodeResolver."); err != nil {
				return err
			}
		}
		if p.NodeOS != "" {
			if err := validNodeOS(prefix+"nodeOS", p.NodeOS); err != nil {
				return err
			}
		}
		for j, ip := range p.NodeLocalDNS {
			if err := CheckNodeLocalIP(ip); err != nil {
				return fmt.Errorf("%snodeLocalDNS[%d]: %w", prefix, j, err)
			}
		}
	}
	return nil
}

// Validate reports the first invalid field by its path under prefix.
func (r *NodeResolver) Validate(prefix string) error {
	if r.Disabled && len(r.Nameservers)+len(r.Searches)+len(r.Options) > 0 {
		return fmt.Errorf("%sdisabled: true excludes nameservers, searches and options", prefix)
	}
	for i, ns := range r.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			return fmt.Errorf("%snameservers[%d]: %q is not an IP address", prefix, i, ns)
		}
	}
	for i, s := range r.Searches {
		if s == "" || strings.ContainsAny(s, " \t\n#") {
			return fmt.Errorf("%ssearches[%d]: %q is not a domain name", prefix, i, s)
		}
	}
	for i, o := range r.Options {
		if o == "" || o[0] == ':' || strings.ContainsAny(o, " \t\n#") {
			return fmt.Errorf("%soptions[%d]: %q is not a resolver option such as \"ndots:2\"", prefix, i, o)
		}
	}
	return nil
}

// CheckComplete reports a config the webhook cannot serve with: the TLS
// files are required, from the file or from flags. Call it once flags
// are applied.
func (w *WebhookConfiguration) CheckComplete() error {
	if w.TLSCertFile == "" || w.TLSPrivateKeyFile == "" {
		return errors.New("tlsCertFile and tlsPrivateKeyFile: required: the webhook serves HTTPS only")
	}
	return nil
}

// Timeouts returns ReadTimeout and WriteTimeout parsed; call it after
// Validate.
func (w *WebhookConfiguration) Timeouts() (read, write time.Duration) {
	read, _ = time.ParseDuration(w.ReadTimeout)
	write, _ = time.ParseDuration(w.WriteTimeout)
	return read, write
}

// BodyProgress returns BodyProgressTimeout parsed; call it after Validate.
func (w *WebhookConfiguration) BodyProgress() time.Duration {
	d, _ := time.ParseDuration(w.BodyProgressTimeout)
	return d
}
