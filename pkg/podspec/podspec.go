package podspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	docs := splitDocuments(data)
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

// splitDocuments splits YAML on "---" lines and drops empty documents.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	flush := func() {
		if len(bytes.TrimSpace(stripComments(cur))) > 0 {
			docs = append(docs, cur)
		}
		cur = nil
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		t := bytes.TrimRight(line, " \t\r\n")
		if bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			flush()
			continue
		}
		cur = append(cur, line...)
	}
	flush()
	return docs
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			continue
		}
		out = append(out, line...)
	}
	return out
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

// Input converts a pod into the engine's input. The pod is used as given:
// call Default first for a manifest that has not been through the API server.
func Input(pod *corev1.Pod) policy.Input {
	in := policy.Input{
		Name:              pod.Name,
		Namespace:         pod.Namespace,
		UID:               string(pod.UID),
		Policy:            policy.Policy(pod.Spec.DNSPolicy),
		PolicyAnnotation:  pod.Annotations[policy.AnnotationDNSPolicy],
		HostNetwork:       pod.Spec.HostNetwork,
		Hostname:          pod.Spec.Hostname,
		Subdomain:         pod.Spec.Subdomain,
		HostnameOverride:  pod.Spec.HostnameOverride,
		SetHostnameAsFQDN: pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN,
	}
	if in.Name == "" && pod.GenerateName != "" {
		// The API server appends five random characters.
		in.Name = pod.GenerateName + "xxxxx"
	}
	if c := pod.Spec.DNSConfig; c != nil {
		in.DNSConfig = &policy.DNSConfig{Nameservers: c.Nameservers, Searches: c.Searches}
		for _, o := range c.Options {
			in.DNSConfig.Options = append(in.DNSConfig.Options, policy.Option{Name: o.Name, Value: o.Value})
		}
	}
	return in
}
