// Package safefile reads a file an operator or another process controls
// without letting it block or exhaust the reader.
//
// Such files are the node's resolv.conf or a hosts file. Read opens the file
// non-blocking: a named pipe without a writer would otherwise block the open
// for as long as it has none. It refuses anything but a regular file
// (ErrNotRegular, naming its type). It refuses a file whose size is over the
// limit before reading a byte (ErrTooLarge). It cuts a file that grows while
// read at limit+1 bytes (ErrTooLarge too). The buffer is sized from the
// file, so at most limit+1 bytes are held. Errors name the file. It imports
// the standard library only, so the pure packages (pkg/resolvconf) may use
// it.
package safefile
