// Package filewatch reports changes to the files a program reads, through
// fsnotify on their directories and a stat poll as fallback.
//
// Watch(ctx, paths, opts...) returns a channel that receives a value after
// each change, debounced. It is the one file watch of the project: the
// node's resolv.conf (pkg/hostresolv), the hosts file (pkg/hosts), the
// serving certificate (pkg/webhook), manifests (the cluster DNS feed) and
// serve's --config file all use it.
//
// # What it sees
//
// It watches the directory of each path, not just the file, so a rename
// over the file is seen. It follows every symlink on the way, in any path
// component, and watches the directory holding each link. A Kubernetes
// ConfigMap or Secret volume swaps its files by renaming a new "..data"
// link over the old one; that event is in the volume's directory, which is
// watched. It watches the file at the end of the chain too, so an in-place
// write made through another path is seen: a node file bind-mounted into
// the container, or a hard link. A path that is a directory is watched
// with its entries, one level deep. The chain is resolved again after
// every change and every poll, so a re-pointed link moves the watch.
//
// The poll stats each path every DefaultPoll (WithPoll), following links.
// A change of device, inode, size, mode or mtime is a change. For a
// directory, so is a change in its entries' names or stamps. A file whose
// mtime is within RacyWindow of the poll is also hashed, up to 1 MiB, as a
// coarse file system can take two writes in one mtime tick. The poll sees
// what file events miss: file systems without inotify (NFS, FUSE),
// bind-mounted files, and a lost event. Without inotify at all (its limits
// reached), Watch warns and polls alone.
//
// # Debounce
//
// A change is reported once the watched files have been quiet for the
// debounce time (DefaultQuiet, WithDebounce), and at the latest maxWait
// after the first event of a burst. Events of unrelated files in the same
// directories are ignored. A value may arrive when nothing changed (a chmod,
// a write of the same bytes): readers compare what they read.
//
// # Bounds
//
// One goroutine per Watch (plus fsnotify's reader), ended when ctx is
// done; the channel is then closed. Steps that can block in the kernel
// (stat, read, adding a watch; a hung NFS server can stall any of them) run
// through safefile.Await, so the watch stops at once on cancellation and
// leaves such a step to finish on its own. Problems of the watch itself
// are logged through the injected *slog.Logger (WithLogger), once until
// they change, and passed to OnError; they never stop the poll.
package filewatch
