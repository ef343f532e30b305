// Package nodenet sets up, keeps and removes what the node-local DNS stage
// needs on the node in transparent mode.
//
// That is its local addresses on an interface, and rules that take DNS to
// and from those addresses out of connection tracking. NodeLocal DNSCache's
// node-cache does the same.
//
// Addresses. With SetupInterface, every Config.IPs address is put on
// Config.Interface ("nodelocaldns"), a dummy device made for it; on a kernel
// without the dummy link type the device cannot be made and the addresses
// go on lo instead. An address on a local interface is local to the node, so
// a pod's packet to it is delivered to the process bound there, whatever
// route or Service would otherwise take it.
//
// Ownership. NodeLocal DNSCache's node-cache names its device
// "nodelocaldns" too, so what this package makes carries a mark that it
// reads back: the device its alias LinkAlias ("dnsconfigurer"), each
// address its origin AddrProto (IFA_PROTO, kept by Linux 6.1 and later).
// On stop it deletes the device only when it carries the mark; on any other
// device (someone else's, or lo) it removes only the addresses it added or
// found marked, never others', and it never deletes lo or another's device.
// On a kernel before 6.1 an address found after a restart cannot be told
// apart and is left in place.
//
// Rules. With SetupNotrack, an nftables table of its own (inet
// "dnsconfigurer-nodelocal") has two base chains at the raw priority (-300,
// before connection tracking at -200): prerouting, with `notrack` for UDP
// and TCP to every address's port, and output, with `notrack` for UDP and
// TCP from every address's port and to it (queries from the node itself).
// An untracked packet skips the nat table, so kube-proxy's DNAT of the
// cluster DNS Service IP (iptables or nftables mode, legacy or nft backend)
// does not apply and the packet reaches the local address; and the stage's
// replies create no conntrack entries (the conntrack-table exhaustion and
// the UDP races that NodeLocal DNSCache exists to avoid). The table is
// replaced in one netlink transaction, so no packet sees it half built, and
// removed in one. It is pure Go (github.com/google/nftables): no iptables
// binary in the image, no clash between the node's legacy and nft
// iptables. Unlike node-cache it adds no ACCEPT rules: an accept in one
// table cannot override a drop in another, so a host firewall that drops
// input by default must allow port 53 to the addresses itself.
//
// Lifecycle (Manager): Prepare takes the node's lease (a shared flock on
// Config.LockFile). When no other instance runs (and not with SkipTeardown),
// it removes a notrack table left by an instance that did not stop. It then
// puts the addresses in place before the stage binds them. EnsureNotrack
// installs the table once the stage serves, so a stage that fails to start
// never captures the Service IP. Keep re-checks both every Config.Interval
// and repairs what was removed (counted). On stop, Teardown removes the
// table first, so the Service IP falls back to the cluster DNS through
// kube-proxy while the stage still answers its lameduck. Then it removes the
// addresses. It does neither when SkipTeardown is set or another instance
// holds the lease (a DaemonSet surge: the new instance keeps the setup it
// shares).
//
// A process that is killed (SIGKILL, an OOM kill: no preStop hook runs)
// leaves everything in place: the Service IP stays captured, and a pod's
// query to it finds nothing listening, until the next instance reaches
// Prepare (kubelet restarts the container at once the first time, then
// after a back-off of 10 s doubling up to 5 min). That instance removes
// the table first and takes back the marked addresses.
//
// Links and Notrack are the two consumer-side interfaces to the kernel; the
// real ones (NetlinkLinks, NftNotrack) take a network namespace handle, so
// tests run them in a namespace of their own.
package nodenet
