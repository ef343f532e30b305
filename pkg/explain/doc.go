// Package explain says why a live pod has its resolv.conf: it gathers the
// pod's facts from the API server and prints the report.
//
// An Explainer reads the pod, finds the shim or NRI plugin on its node,
// gets the agent's /node-settings through a SettingsFetcher and each
// running container's /etc/resolv.conf through a ResolvReader. The kube
// adapters (PortForwarder, PodExec) go through the API server's
// pods/portforward and pods/exec; tests pass fakes.
//
// Write prints the facts as text (a resolv.conf with # lines) or JSON. The
// policy itself comes in as a Compute, so the report and render share one
// engine and one JSON form. Everything from a container or an agent is
// escaped for a terminal (EscapeTerminal).
//
// topology.go says which endpoints the pod gets for each headless
// Service's name: Route applies pkg/topology's rule, the one the cluster
// DNS's store follows, to the pod's node, its topology zone label and the
// Service's EndpointSlices.
//
// It is an adapter: it imports client-go, not the other way round.
package explain
