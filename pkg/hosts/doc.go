// Package hosts serves static records from a hosts file and from per-name
// overrides in the server's configuration.
//
// The hosts file is in the /etc/hosts format (k3s's NodeHosts ConfigMap,
// minikube's host.minikube.internal, the node's /etc/hosts). It is watched
// for changes. It is the cluster DNS server's Static source
// (pkg/clusterdns's WithStatic); it imports miekg/dns for the prebuilt
// records and nothing of pkg/clusterdns.
//
// README.md is the manual: format, overrides, bounds, lookup, reloads.
package hosts
