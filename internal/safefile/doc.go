// Package safefile reads a file an operator or another process controls
// (the node's resolv.conf, a hosts file) without letting it block or
// exhaust the reader: Read opens it non-blocking (a named pipe without a
// writer would otherwise block the open for as long as it has none),
// refuses anything but a regular file (ErrNotRegular, naming its type),
// refuses a file whose size is over the limit before reading a byte
// (ErrTooLarge), and cuts one that grows while read at limit+1 bytes
// (ErrTooLarge too). The buffer is sized from the file, so at most limit+1
// bytes are held. Errors name the file. It imports the standard library
// only, so the pure packages (pkg/resolvconf) may use it.
package safefile
