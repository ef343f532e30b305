//go:build !linux

package h2relay

import "net"

// hangup cannot tell a peer's hang-up without reading from it outside
// Linux (POLLRDHUP): a relay blocked writing to one peer notices the other
// hanging up only at WriteTimeout.
func hangup(conn, peer net.Conn) func() bool { return nil }
