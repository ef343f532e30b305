// Package hostresolv reads the node's resolv.conf the way kubelet does and
// renders resolver configuration back into resolv.conf form.
//
// resolvconf.go is a leaf: standard library only, so that every other part
// of dnsconfigurer (the policy engine's callers, the CRI shim, the cluster DNS
// server) can depend on it. The parser keeps kubelet v1.36's rules exactly:
// nameserver lines accumulate and a bare one is an error, the last search
// line wins, a lone "." search entry is dropped and one trailing dot is
// trimmed from every other entry, options accumulate with a later option of
// the same name replacing the earlier one, only lines starting with '#' are
// comments, unknown keywords (domain, sortlist, lookup, ...) are ignored, and
// at most 10 MiB is read.
//
// Unlike kubelet, option order is stable: an option keeps the position of
// its first occurrence and takes the value of its last.
package hostresolv
