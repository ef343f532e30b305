// Package fqdn derives a pod's hostname, domain and kernel nodename exactly
// as kubelet v1.37 does (v1.35 and v1.36 behave the same with their
// default feature gates).
//
// The kubelet functions are GeneratePodHostNameAndDomain and
// GetNodenameForKernel. ForPod always reads spec.hostnameOverride; kubelet
// before 1.35 ignores it, a rule pkg/policy applies by the node's kubelet
// version. The package also holds the RFC 1123 name checks the
// API server applies to those fields.
//
// It is pure: standard library only, no client-go, gRPC, DNS library or
// logger. Everything kubelet only logs (a truncated hostname) is returned as a
// value for the caller to report.
package fqdn
