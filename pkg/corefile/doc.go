// Package corefile converts a CoreDNS Corefile, or a kube-dns ConfigMap,
// into a dnsconfigurer ServerConfiguration with a finding per directive.
//
// Parse reads a Corefile with CoreDNS's own parser
// (github.com/coredns/caddy/caddyfile): snippets and import work as in
// CoreDNS, within bounds; {$VAR} is refused, and so is an unrendered
// template's placeholder (k3s's %{…}%, Helm's {{ }}). Every error opens
// with the FILE:LINE it is about. Convert maps each plugin onto
// ServerConfiguration fields.
// Each directive gets one Finding: converted, differs (what differs) or
// dropped (why, and the workaround). KubeDNS does the same for a kube-dns
// ConfigMap's stubDomains and upstreamNameservers.
//
// A coredns ConfigMap's hosts file that is one of its keys (k3s's
// NodeHosts) is carried into the output ConfigMap, or the chart's
// dns.files, when ConfigMapKeys.Carry is set (Result.Files,
// Result.ConfigMap, Result.HelmValues), at MountDir, where deploy/ and the
// chart mount that ConfigMap. ConfigMapKeys.CheckKey, Kubernetes' key rule,
// comes from the caller.
//
// The package reads only the files an import names, through Input.Imports
// (a ConfigMap's keys in memory, KeysFS) or from the Corefile's directory;
// caddy parses the Corefile with those files spliced in, and opens none.
// It writes nothing. An input is bounded (MaxInputBytes, MaxKeys, the
// import bounds), and ReadSource, Parse and Run stop when their context
// ends. It logs nothing. It imports api/v1alpha1, the caddyfile parser,
// sigs.k8s.io/yaml and go.yaml (for a ConfigMap), nothing of
// apimachinery. `dnsconfigurer convert` (docs/convert.md) is its command.
package corefile
