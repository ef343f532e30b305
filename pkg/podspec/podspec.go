package podspec

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// MaxManifestSize caps a pod manifest read by Decode (the API server's own
// request body limit is 3 MiB).
const MaxManifestSize = 3 << 20

// Decode reads one v1 Pod manifest, YAML or JSON, as kubectl takes it.
// Unknown fields, a second document, another kind or apiVersion, and a body
// over MaxManifestSize are errors that say which.
func Decode(r io.Reader) (*corev1.Pod, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("read pod manifest: %w", err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("pod manifest is larger than %d bytes", MaxManifestSize)
	}
	return DecodeBytes(data)
}

// DecodeBytes is Decode on a buffer.
func DecodeBytes(data []byte) (*corev1.Pod, error) {
	docs, err := documents(data)
	if err != nil {
		return nil, fmt.Errorf("pod manifest is not valid YAML or JSON: %s", oneLine(err))
	}
	if len(docs) == 0 {
		return nil, errors.New("pod manifest is empty")
	}
	if len(docs) > 1 {
		return nil, fmt.Errorf("pod manifest has %d documents; exactly one Pod is expected", len(docs))
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(docs[0], &head); err != nil {
		return nil, fmt.Errorf("pod manifest is not valid YAML or JSON: %s", oneLine(err))
	}
	if head.Kind != "Pod" || head.APIVersion != "v1" {
		return nil, fmt.Errorf("manifest is apiVersion %q kind %q; a v1 Pod is expected (apiVersion: v1, kind: Pod)", head.APIVersion, head.Kind)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(docs[0], &pod); err != nil {
		return nil, fmt.Errorf("pod manifest: %s", oneLine(err))
	}
	return &pod, nil
}

// documents splits a YAML stream into its documents with apimachinery's
// reader, as kubectl does (a "---" line at the start of a line separates;
// CRLF line ends are read as LF), and drops the empty ones: blank, only
// comments, or null.
func documents(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if js, err := yaml.YAMLToJSON(doc); err == nil && bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue // empty; a document that does not parse is kept for the decoder to report
		}
		docs = append(docs, doc)
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Default applies the API server's defaulting that matters for DNS: an empty
// dnsPolicy becomes ClusterFirst and an empty namespace "default" (what
// kubectl apply gives a manifest without one).
func Default(pod *corev1.Pod) {
	if pod.Spec.DNSPolicy == "" {
		pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if pod.Namespace == "" {
		pod.Namespace = corev1.NamespaceDefault
	}
}

// Meta and Spec are the one list of the Pod fields the engine reads, with
// corev1.Pod's JSON names: decoding a Pod's JSON into them reads only these
// fields (the webhook's fast path), Fields.Pod keeps only them in a cache
// (the shim's pod informer), and Input converts them.
type Meta struct {
	Name         string      `json:"name"`
	GenerateName string      `json:"generateName"`
	Namespace    string      `json:"namespace"`
	UID          types.UID   `json:"uid"`
	Annotations  Annotations `json:"annotations"`
}

// Spec is the part of a PodSpec the engine reads; see Meta.
type Spec struct {
	DNSPolicy         corev1.DNSPolicy `json:"dnsPolicy"`
	DNSConfig         *DNSConfig       `json:"dnsConfig"`
	HostNetwork       bool             `json:"hostNetwork"`
	Hostname          string           `json:"hostname"`
	Subdomain         string           `json:"subdomain"`
	HostnameOverride  *string          `json:"hostnameOverride"`
	SetHostnameAsFQDN *bool            `json:"setHostnameAsFQDN"`
}

// Fields is a Pod reduced to Meta and Spec.
type Fields struct {
	Metadata Meta `json:"metadata"`
	Spec     Spec `json:"spec"`
}

// FieldsOf copies the engine's fields out of pod.
func FieldsOf(pod *corev1.Pod) Fields {
	return Fields{
		Metadata: Meta{Name: pod.Name, GenerateName: pod.GenerateName, Namespace: pod.Namespace, UID: pod.UID,
			Annotations: pod.Annotations},
		Spec: Spec{DNSPolicy: pod.Spec.DNSPolicy, DNSConfig: (*DNSConfig)(pod.Spec.DNSConfig), HostNetwork: pod.Spec.HostNetwork,
			Hostname: pod.Spec.Hostname, Subdomain: pod.Spec.Subdomain, HostnameOverride: pod.Spec.HostnameOverride,
			SetHostnameAsFQDN: pod.Spec.SetHostnameAsFQDN},
	}
}

// Pod is a Pod holding only f: Input gives the same result for it as for
// the pod f came from.
func (f Fields) Pod() *corev1.Pod {
	m, sp := f.Metadata, f.Spec
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace,
			UID: m.UID, Annotations: m.Annotations},
		Spec: corev1.PodSpec{DNSPolicy: sp.DNSPolicy, DNSConfig: (*corev1.PodDNSConfig)(sp.DNSConfig), HostNetwork: sp.HostNetwork,
			Hostname: sp.Hostname, Subdomain: sp.Subdomain, HostnameOverride: sp.HostnameOverride,
			SetHostnameAsFQDN: sp.SetHostnameAsFQDN},
	}
}

// Input converts a pod into the engine's input. The pod is used as given:
// call Default first for a manifest that has not been through the API server.
func Input(pod *corev1.Pod) policy.Input { return FieldsOf(pod).Input() }

// Input converts the fields into the engine's input (see Input).
func (f Fields) Input() policy.Input {
	m, sp := f.Metadata, f.Spec
	in := policy.Input{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               string(m.UID),
		Policy:            policy.Policy(sp.DNSPolicy),
		PolicyAnnotation:  m.Annotations[policy.AnnotationDNSPolicy],
		HostNetwork:       sp.HostNetwork,
		Hostname:          sp.Hostname,
		Subdomain:         sp.Subdomain,
		HostnameOverride:  sp.HostnameOverride,
		SetHostnameAsFQDN: sp.SetHostnameAsFQDN != nil && *sp.SetHostnameAsFQDN,
	}
	if in.Name == "" && m.GenerateName != "" {
		// The API server appends five random characters.
		in.Name = m.GenerateName + "xxxxx"
	}
	if c := sp.DNSConfig; c != nil {
		in.DNSConfig = &policy.DNSConfig{Nameservers: c.Nameservers, Searches: c.Searches}
		for _, o := range c.Options {
			in.DNSConfig.Options = append(in.DNSConfig.Options, policy.Option{Name: o.Name, Value: o.Value})
		}
	}
	return in
}
