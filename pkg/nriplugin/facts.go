package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/containerd/nri/pkg/api"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Sources of a pod's facts, as the log labels them.
const (
	sourceAPIServer = "apiserver"
	sourceSandbox   = "sandbox"
)

// maxSandboxFile bounds a sandbox resolv.conf or hostname file: kubelet's
// output is at most a few KiB (32 search paths of 2048 characters in all).
const maxSandboxFile = 64 << 10

// sandboxResolvConf is the source of ctr's /etc/resolv.conf bind mount when
// it is the sandbox's own file (<cri root>/sandboxes/<sandbox id>/resolv.conf),
// "" otherwise: the CRI request mounted a file of its own there, or
// containerd had none.
func sandboxResolvConf(pod *api.PodSandbox, ctr *api.Container) string {
	for _, m := range ctr.GetMounts() {
		if m.GetDestination() != resolvPath {
			continue
		}
		src := m.GetSource()
		if filepath.Base(src) == "resolv.conf" && filepath.Base(filepath.Dir(src)) == pod.GetId() {
			return src
		}
		return ""
	}
	return ""
}

// facts is the engine input of pod: from the API server when a lookup is
// configured and knows the pod, else recovered from kubelet's output, the
// sandbox file at path.
func (p *Plugin) facts(ctx context.Context, pod *api.PodSandbox, path string, host policy.Host) (policy.Input, string, error) {
	if p.pods != nil {
		start := time.Now()
		if in, ok := p.lookup(ctx, pod); ok {
			p.m.lookups.WithLabelValues(lookupHit).Inc()
			return in, sourceAPIServer, nil
		}
		p.m.lookups.WithLabelValues(lookupMiss).Inc()
		p.log.Warn("pod not in the API server cache; using the sandbox resolv.conf", "pod", podName(pod), "uid", pod.GetUid(),
			"waited", time.Since(start).Round(time.Millisecond).String())
	}
	in, err := p.fromSandboxFile(pod, path, host)
	return in, sourceSandbox, err
}

// lookup asks the API server lookup for pod, waiting at most the lookup
// timeout, and not at all for a static pod (SandboxPod.LookupWait), as the
// shim does.
func (p *Plugin) lookup(ctx context.Context, pod *api.PodSandbox) (policy.Input, bool) {
	sb := sandboxOf(pod).Pod()
	ctx, cancel := context.WithTimeout(ctx, sb.LookupWait(p.lookupTimeout))
	defer cancel()
	return p.pods.PodFor(ctx, sb)
}

// fromSandboxFile recovers pod's input from the sandbox resolv.conf
// kubelet's DNS config was written to, with the inverse both agents use
// (podfacts.FromSandbox): the file and the sandbox's hostname file next
// to it give kubelet's DNS config and hostname.
func (p *Plugin) fromSandboxFile(pod *api.PodSandbox, path string, host policy.Host) (policy.Input, error) {
	data, _, err := safefile.Read(path, maxSandboxFile)
	if err != nil {
		return policy.Input{}, fmt.Errorf("sandbox resolv.conf: %w", err)
	}
	rc, err := resolvconf.ParseBytes(data)
	if err == nil {
		err = checkSandboxFile(data, rc)
	}
	if err != nil {
		return policy.Input{}, fmt.Errorf("sandbox resolv.conf %q: %w", path, err)
	}
	sb := sandboxOf(pod)
	sb.Hostname = readHostname(filepath.Join(filepath.Dir(path), "hostname"))
	sb.DNS = &policy.Output{Nameservers: rc.Nameservers, Searches: rc.Searches, Options: rc.Options}
	return podfacts.FromSandbox(sb, p.eng, host)
}

// checkSandboxFile refuses a sandbox file that containerd cannot have
// written from kubelet's DNS config or the node's file: bytes other than
// text (the parser skips lines it does not know, so binary data would
// recover as an empty config), or a nameserver that is not an IP address.
// Such a file is not recomputed; the container keeps it.
func checkSandboxFile(data []byte, rc resolvconf.Config) error {
	if !utf8.Valid(data) {
		return errors.New("not UTF-8 text")
	}
	for i, r := range string(data) {
		if r == 0x7f || r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
			return fmt.Errorf("control character %U at byte %d", r, i)
		}
	}
	for _, ns := range rc.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			return fmt.Errorf("nameserver %q is not an IP address", ns)
		}
	}
	return nil
}

// sandboxOf is what NRI says of pod's sandbox. Its DNS config and
// hostname are not in it: they are in the sandbox's files.
func sandboxOf(pod *api.PodSandbox) podfacts.Sandbox {
	return podfacts.Sandbox{Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUid(),
		Labels: pod.GetLabels(), Annotations: pod.GetAnnotations(), HostNetwork: hostNetwork(pod)}
}

// hostNetwork reports a sandbox in the node's network namespace: containerd
// lists a network namespace for pod-network sandboxes only.
func hostNetwork(pod *api.PodSandbox) bool {
	if pod.GetLinux() == nil {
		return false // no Linux facts at all: not a containerd sandbox on Linux
	}
	for _, ns := range pod.GetLinux().GetNamespaces() {
		if ns.GetType() == "network" {
			return false
		}
	}
	return true
}

// readHostname is the sandbox's hostname file, "" when unreadable.
func readHostname(path string) string {
	data, _, err := safefile.Read(path, maxSandboxFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
