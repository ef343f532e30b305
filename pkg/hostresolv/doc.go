// Package hostresolv reads the node's resolv.conf the way kubelet does and
// renders resolver configuration back into resolv.conf form.
//
// resolvconf.go (Parse, Format) uses the standard library only; watch.go adds
// the fsnotify watcher (Watch) that keeps a parsed, validated, last-good copy
// of the file in memory and publishes immutable Snapshots to subscribers.
// The policy engine does not import this package: adapters convert a
// Snapshot into policy.Host.
//
// The parser keeps kubelet v1.36's rules exactly:
// nameserver lines accumulate and a bare one is an error, the last search
// line wins, a lone "." search entry is dropped and one trailing dot is
// trimmed from every other entry, options accumulate with a later option of
// the same name replacing the earlier one, only lines starting with '#' are
// comments, unknown keywords (domain, sortlist, lookup, ...) are ignored, and
// at most 10 MiB is read.
//
// The watcher follows in-place writes, renames over the file, delete and
// re-create, a re-pointed symlink and changes of the symlink's target (it
// watches the directories of every hop, not the inode). In LastGood mode a
// file that is unreadable, unparsable or has lost all its nameservers does
// not replace the served config; the problem is logged, counted and exposed
// on the snapshot. Loopback nameservers (systemd-resolved's 127.0.0.53 stub)
// are never handed to pods, and Auto switches to systemd-resolved's upstream
// file when the stub is all there is.
//
// Unlike kubelet, option order is stable: an option keeps the position of
// its first occurrence and takes the value of its last.
package hostresolv
