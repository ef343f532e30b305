// Package gendeploy writes deploy/'s resource files from the Helm chart
// charts/dnsconfigurer, so that the chart is their one source.
//
// Generate runs `helm template` on the chart with a fixed table of value
// sets and puts each rendered object in the deploy/ file that holds it, in
// that file's order. It strips what helm adds and kustomize does not have:
// the `# Source:` lines, helm test Pods, the shim DaemonSet's config
// checksum (deploy/shim names its ConfigMap by a content hash instead) and
// kube-dns's helm.sh/resource-policy. The chart's data files
// (files/shim.yaml, dns-kubeadm.yaml, dashboard.json, prometheusrule.yaml)
// are copied. Every generated YAML file opens with Header; a copy that is a
// configMapGenerator's data stays byte-identical, since a comment would
// change the ConfigMap, and deploy/GENERATED lists every generated file.
//
// Compare tells which files of a directory differ from a generation, and
// where. hack/gendeploy is the command; test/deploy runs the comparison.
//
// The kustomization.yaml files are not generated: they compose the
// generated files, and test/deploy's TestChartMatchesKustomize proves each
// composition equals the chart's rendering of the same topology.
package gendeploy
