package dnsmsg

import (
	"net"
	"net/netip"
)

// ClientAddr is the IP address of a query's client, a UDP or TCP peer,
// IPv4 unmapped; the zero address for any other net.Addr. The listener
// counts TCP connections by it, the forwarders share their slots by it and
// the cluster DNS places the client by it.
func ClientAddr(a net.Addr) netip.Addr {
	var ip net.IP
	switch v := a.(type) {
	case *net.UDPAddr:
		ip = v.IP
	case *net.TCPAddr:
		ip = v.IP
	default:
		return netip.Addr{}
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}

// Origin is who asked a query: its client's address (ClientAddr) and
// whether it came over TCP. A forwarder shares its slots per client and
// asks upstream over TCP what came over TCP. The zero Origin is one
// client of its own, over UDP.
type Origin struct {
	Client netip.Addr
	TCP    bool
}
