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
// The parser keeps kubelet v1.36's rules exactly: nameserver lines
// accumulate and a bare one is an error, the last search line wins, a lone
// "." search entry is dropped and one trailing dot is trimmed from every
// other entry, options accumulate with a later option of the same name
// replacing the earlier one, only lines starting with '#' are comments,
// unknown keywords (domain, sortlist, lookup, ...) are ignored, and at most
// 10 MiB is read. Unlike kubelet, option order is stable: an option keeps
// the position of its first occurrence and takes the value of its last.
//
// ReadFile (and ParseFile) go further than kubelet so that no file can stall
// or swell the caller: the file is opened non-blocking and anything but a
// regular file (a named pipe, a device, a directory) is ErrNotRegular at
// once, where kubelet's open of a named pipe without a writer blocks; a file
// whose size is over 10 MiB is ErrTooLarge before a byte is read; and the
// read buffer is sized from the file, so a read holds at most 10 MiB + 1
// byte.
package resolvconf
