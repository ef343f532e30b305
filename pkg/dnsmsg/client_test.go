package dnsmsg_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

func TestClientAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr
		want netip.Addr
	}{
		{"udp", &net.UDPAddr{IP: net.ParseIP("10.0.0.7"), Port: 5353}, netip.MustParseAddr("10.0.0.7")},
		{"tcp, IPv4 in IPv6", &net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.8"), Port: 53}, netip.MustParseAddr("10.0.0.8")},
		{"tcp, IPv6", &net.TCPAddr{IP: net.ParseIP("fd00::53"), Port: 53}, netip.MustParseAddr("fd00::53")},
		{"no IP", &net.UDPAddr{}, netip.Addr{}},
		{"another kind", &net.UnixAddr{Name: "/run/x", Net: "unix"}, netip.Addr{}},
		{"nil", nil, netip.Addr{}},
	} {
		if got := dnsmsg.ClientAddr(tc.addr); got != tc.want {
			t.Errorf("%s: ClientAddr = %v, want %v", tc.name, got, tc.want)
		}
	}
}
