// Package nodelocal tests `dnsconfigurer serve --mode node-local` in
// transparent mode as a node runs it.
//
// The real binary runs in a network namespace standing for the node. A
// second namespace stands for a pod, with a veth pair between them.
// kube-proxy's DNAT of the cluster DNS Service IP is an iptables rule. DNS
// stubs stand for the cluster DNS and the node's upstream. It needs root,
// ip(8), iptables and conntrack (bash test/e2e/setup.sh).
package nodelocal
