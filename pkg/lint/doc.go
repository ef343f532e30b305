// Package lint checks the pod templates of manifests for DNS problems and
// prints the findings as text, JSON or SARIF 2.1.0.
//
// The checks are pkg/policy's; this package adds where each finding is: file,
// document, line, object and the full field path. It must not import
// client-go.
//
// Findings are of four rules. api: the API server refuses the pod, or the
// object whole (no kind, over 3 MiB, a field of the wrong type). node and
// trim: kubelet fails or trims it (validate --strict). warning: accepted
// with a warning, the API server's or kubelet's (render's warnings, such
// as ClusterFirst on a hostNetwork pod); a warning never fails a run.
//
// A dnsConfig option value that is a number (value: 2, as helm --set
// writes it) is an api finding at its field: PodDNSConfigOption.value is
// a string, and the API server's JSON decoding refuses the object.
//
// Finder reads the templates of Kubernetes' workload kinds, and of other
// kinds at a TemplatePath (KnownTemplates: Argo, Tekton, Knative).
package lint
