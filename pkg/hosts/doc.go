// Package hosts serves static records from a hosts file and from per-name
// overrides in the server's configuration.
//
// The hosts file is in the /etc/hosts format (k3s's NodeHosts ConfigMap,
// minikube's host.minikube.internal, the node's /etc/hosts). It is watched
// for changes. It is the cluster DNS server's Static source
// (pkg/clusterdns's WithStatic); it imports miekg/dns for the prebuilt
// records and nothing of pkg/clusterdns.
//
// # Format
//
// Each line is "ADDRESS NAME [ALIASES...]", fields separated by spaces or
// tabs; "#" starts a comment to the end of the line; blank lines are
// ignored; "\r\n" line ends are accepted. As in CoreDNS's hosts plugin, a
// bad line does not refuse the file (it is edited live, and one typo must
// not drop every record): it is skipped with a Warning naming its line,
// `line 7: "300.1.1.1": not an IP address`.
//
//   - ADDRESS is an IPv4 or IPv6 address in the syntax of net/netip (no
//     leading zeros in IPv4, which glibc would read as octal). An IPv6 zone
//     (fe80::1%eth0) is dropped, as CoreDNS does: it means nothing in a DNS
//     answer, and /etc/hosts files carry such lines. An IPv4-mapped
//     address (::ffff:10.0.0.1) is its IPv4 address: an A record and an
//     in-addr.arpa PTR record, as CoreDNS does. A bad address skips the
//     line; a line with an address and no name is skipped too.
//   - NAME and ALIASES are host names, all served alike: at most 253
//     characters without the final dot (which is optional), labels of 1 to
//     63 letters, digits, hyphens and underscores. They are lowercased and
//     made fully qualified. A bad name is skipped with a warning, the other
//     names of its line are kept.
//
// The same (address, name) on several lines counts once. Every name has an
// A record per IPv4 address and an AAAA record per IPv6 address, in file
// order; every address has a PTR record per name at its reverse name
// (in-addr.arpa, ip6.arpa), in file order, unless Config.NoReverse. The
// unspecified addresses 0.0.0.0 and :: (the "blocked" address of
// ad-blocking hosts files) get no PTR records: the reverse name would list
// every blocked name. Every record has Config.TTL, 3600 s by default.
//
// # Overrides
//
// Config.Overrides give names their addresses whatever the file says: for
// an overridden name none of the file's records are served, neither its A
// and AAAA records nor the PTR records pointing to it; the override's
// records and their PTR records are, with the override's TTL. Config.Validate
// reports every problem, each naming its field (`overrides[2].name: "a..b":
// empty label`, `overrides[0].addresses: at least one address is
// required`): a bad configuration is refused whole, unlike a bad line.
//
// # Bounds
//
// A file over MaxFileSize (16 MiB) is refused from its size before a byte is
// read, a line over MaxLineLength (64 KiB) or more than MaxEntries (100,000)
// (address, name) pairs, overrides included, refuse the whole file (an
// error, not a warning): they are not typos. At most MaxWarnings (100)
// warnings are listed, then one summary. A named pipe, a device or a
// directory in the file's place is refused without blocking (the file is
// opened non-blocking, as pkg/resolvconf's ReadFile does).
//
// # Lookup
//
// Table.Lookup(name, qtype) takes a lowercase fully qualified name and
// returns its A, AAAA or PTR records (every record of the name for ANY,
// none for other types) and whether the name has records of any type, so
// that the server answers NODATA rather than NXDOMAIN or forwarding. The
// records are prebuilt; a lookup is map lookups without allocation. The
// returned records and slice belong to the table and callers must not
// modify them (the slice's capacity is its length, so an append copies).
//
// # Reloads
//
// A Source (NewSource, then Run) reads the file at start and watches it
// with internal/filewatch: file events on its directory and every symlink
// hop (so a ConfigMap's swapped ..data link is seen), and a stat every
// interval (WithInterval, 5 s by default, as CoreDNS). Each change is a
// check: it stats the file (following symlinks) and reads it when its
// inode, size or mtime changed, when the last read failed, or while its
// mtime is within 2 s of the read (a write in the same mtime tick of a
// coarse file system would be missed otherwise). A check that leaves the
// file unsettled (a failed read, such an mtime, an emptied file) is
// repeated after interval. A read whose content is unchanged (SHA-256)
// keeps the table. Lookup reads
// the table in service through an atomic pointer; a new table replaces it
// whole, so a query sees one version of the file.
//
// A missing, unreadable, non-regular or over-bound file keeps the last good
// table in service (at start: the overrides alone); the problem is logged
// (log/slog, WithLogger) and counted once until it changes or ends, and is
// Status().Err meanwhile. A file that has become empty while the table had
// entries replaces them only when the next check finds it unchanged (an
// in-place writer truncates the file before writing it). SetConfig changes
// the TTL, reverse setting and overrides at run time, rebuilding the table
// from the last good content of the file. Status and Updated (a channel
// closed after the next read) let tests and callers follow reloads without
// sleeping. Every step that can block in the kernel runs while Run also
// waits for its context, so Run returns when the context is done.
//
// Metrics: a Source is a prometheus.Collector of
// dnsconfigurer_hosts_entries, _reloads_total, _reload_errors_total{reason},
// _warnings, _file_healthy and _last_reload_success_timestamp_seconds.
package hosts
