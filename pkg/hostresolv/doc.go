// Package hostresolv watches the node's resolver file (kubelet's resolvConf)
// and keeps a parsed, validated, last-good copy in memory.
//
// It publishes the copy to subscribers as immutable Snapshots. Parsing and
// the resolver-config model are pkg/resolvconf's. The package does not
// import the policy engine: podfacts.HostOf is the engine's view of a
// snapshot, the one conversion both node agents (the CRI shim, the NRI
// plugin) use.
//
// The watcher follows in-place writes, renames over the file, delete and
// re-create, a re-pointed symlink and changes of the symlink's target (it
// watches the directories of every hop), and in-place writes that come
// through another path, such as the node writing the file a container has
// bind-mounted (it watches the file at the end of the chain too). A rename
// over a file that is bind-mounted into the container does not reach the
// container at all. In LastGood mode a
// file that is unreadable, unparsable or has lost all its nameservers does
// not replace the served config; the problem is logged, counted and exposed
// on the snapshot. Loopback nameservers (systemd-resolved's 127.0.0.53 stub)
// are not handed to pods in their own network namespace: the policy engine
// applies resolvconf.WithoutLoopback to every host-type pod off the host
// network, and the snapshot's Config shows that view (Raw is the file as
// kubelet reads it, and what hostNetwork pods get). Auto
// switches to systemd-resolved's upstream file when the stub is all there
// is.
//
// Limits: the file is read with resolvconf.ReadFile, so a file over 10 MiB
// is a problem without being read (start-up with a 64 MB file allocates
// under 1 MiB), and a named pipe, device or directory in the file's place is
// a problem at once instead of a blocked open. Every step that can block in
// the kernel (open, read, stat, adding a directory watch) runs while the
// watcher also waits for its context, so Watch and the watch loop return
// within milliseconds of cancellation whatever the file system does; a step
// still blocked is left to finish on its own goroutine.
package hostresolv
