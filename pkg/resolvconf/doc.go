// Package resolvconf is the resolver-config model every part of
// dnsconfigurer shares.
//
// Config holds nameservers, search domains and options. Parse and ParseFile
// apply kubelet's rules. Format writes the form containerd writes a sandbox
// resolv.conf in. The package also holds option names and rendering
// (OptionName, FormatOption, NormalizeOption) and the loopback rule
// (WithoutLoopback).
//
// It is a leaf package that imports the standard library only, so the pure
// policy engine, the host file watcher (pkg/hostresolv), the CRI shim, the
// webhook and every command can depend on it (as tailscale's resolvconffile
// is a leaf under net/dns).
//
// The parser keeps kubelet v1.36's rules exactly. Nameserver lines
// accumulate, and a bare one is an error. The last search line wins. A lone
// "." search entry is dropped, and one trailing dot is trimmed from every
// other entry. Options accumulate, a later option of the same name replacing
// the earlier one. Only lines starting with '#' are comments. Unknown
// keywords (domain, sortlist, lookup, ...) are ignored. At most 10 MiB is
// read. Unlike kubelet, option order is stable: an option keeps the position
// of its first occurrence and takes the value of its last.
//
// ReadFile (and ParseFile) go further than kubelet so that no file can stall
// or swell the caller. The file is opened non-blocking. Anything but a
// regular file (a named pipe, a device, a directory) is ErrNotRegular at
// once; kubelet's open of a named pipe without a writer blocks. A file whose
// size is over 10 MiB is ErrTooLarge before a byte is read. The read buffer
// is sized from the file, so a read holds at most 10 MiB + 1 byte.
package resolvconf
