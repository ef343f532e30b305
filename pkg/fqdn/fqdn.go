package fqdn

import (
	"fmt"
	"strings"
)

// Pod holds the fields of a pod that name it.
type Pod struct {
	Name             string  // metadata.name
	Namespace        string  // metadata.namespace
	Hostname         string  // spec.hostname
	Subdomain        string  // spec.subdomain
	HostnameOverride *string // spec.hostnameOverride (feature HostnameOverride: on by default since 1.35, GA in 1.37)
}

// Names is what kubelet derives from a Pod.
type Names struct {
	// Hostname is the short hostname, at most 63 characters.
	Hostname string
	// Domain is "<subdomain>.<namespace>.svc.<clusterDomain>", or empty when
	// the pod has no subdomain or uses hostnameOverride.
	Domain string
	// Truncated reports that the hostname was cut to 63 characters (kubelet
	// only logs this).
	Truncated bool
	// Original is the hostname before truncation.
	Original string
	// From is the pod field the hostname comes from: "spec.hostnameOverride",
	// "spec.hostname" or "metadata.name".
	From string
}

// FQDN is "<hostname>.<domain>", or empty without a domain.
func (n Names) FQDN() string {
	if n.Domain == "" {
		return ""
	}
	return n.Hostname + "." + n.Domain
}

// ForPod returns the pod's hostname and domain as kubelet's
// GeneratePodHostNameAndDomain does, with its error texts.
func ForPod(p Pod, clusterDomain string) (Names, error) {
	if p.HostnameOverride != nil {
		h := *p.HostnameOverride
		if msgs := Subdomain(h); len(msgs) != 0 {
			return Names{}, fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", h, strings.Join(msgs, ";"))
		}
		return truncate(p.Name, h, "", "spec.hostnameOverride")
	}
	h, from := p.Name, "metadata.name"
	if p.Hostname != "" {
		if msgs := Label(p.Hostname); len(msgs) != 0 {
			return Names{}, fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", p.Hostname, strings.Join(msgs, ";"))
		}
		h, from = p.Hostname, "spec.hostname"
	}
	domain := ""
	if p.Subdomain != "" {
		if msgs := Label(p.Subdomain); len(msgs) != 0 {
			return Names{}, fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", p.Subdomain, strings.Join(msgs, ";"))
		}
		domain = p.Subdomain + "." + p.Namespace + ".svc." + clusterDomain
	}
	return truncate(p.Name, h, domain, from)
}

func truncate(podName, hostname, domain, from string) (Names, error) {
	n := Names{Hostname: hostname, Domain: domain, Original: hostname, From: from}
	if len(hostname) <= MaxLabelLength {
		return n, nil
	}
	n.Truncated = true
	n.Hostname = strings.TrimRight(hostname[:MaxLabelLength], "-.")
	if n.Hostname == "" {
		return Names{}, fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return n, nil
}

// TooLongError is kubelet's sandbox failure for a setHostnameAsFQDN FQDN that
// does not fit the kernel's 64-character nodename.
type TooLongError struct {
	FQDN string
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", e.FQDN, MaxKernelHostname, len(e.FQDN))
}

// KernelHostname is the nodename the sandbox gets (GetNodenameForKernel): the
// FQDN when setHostnameAsFQDN is set and there is a domain, else the short
// hostname. An FQDN over 64 characters is a *TooLongError; it is never
// truncated.
func KernelHostname(n Names, setHostnameAsFQDN bool) (string, error) {
	if !setHostnameAsFQDN || n.Domain == "" {
		return n.Hostname, nil
	}
	f := n.FQDN()
	if len(f) > MaxKernelHostname {
		return "", &TooLongError{FQDN: f}
	}
	return f, nil
}
