// Package nodelocal tests `dnsconfigurer serve --mode node-local` in
// transparent mode as a node runs it: the real binary in a network namespace
// standing for the node, a second namespace standing for a pod (a veth
// pair between them), kube-proxy's DNAT of the cluster DNS Service IP as an
// iptables rule, and DNS stubs for the cluster DNS and the node's upstream.
// It needs root, ip(8), iptables and conntrack (bash test/e2e/setup.sh).
package nodelocal
