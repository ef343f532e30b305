//go:build !linux

package udpbatch

import (
	"net"
	"net/netip"
)

// Without Linux's recvmmsg and sendmmsg a Conn reads one datagram at a
// time, and a reply leaves from the address the kernel picks (the
// destination of a query to a wildcard address is not read).

type rawMsg struct{}

func (*rawMsg) zone() string { return "" }

func newBatchIO(*net.UDPConn, bool) packetIO { return nil }

func batchUnavailable(error) bool { return false }

const oobSize = 0

func parsePktinfo([]byte) netip.Addr { return netip.Addr{} }

func putPktinfo([]byte, netip.Addr) int { return 0 }
