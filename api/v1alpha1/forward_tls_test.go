package v1alpha1

import (
	"net/netip"
	"slices"
	"testing"
)

// TestForwardUpstreamsValidate: tls:// upstreams, their TLS settings, and a
// resolv.conf path among addresses.
func TestForwardUpstreamsValidate(t *testing.T) {
	tlsRoute := func(c *ServerConfiguration) *ForwardRoute {
		c.Forward[1].Upstreams = []string{"tls://1.1.1.1", "tls://[2606:4700::1111]:5353"}
		return &c.Forward[1]
	}
	checkMutations(t, []mutation{
		{"tls upstreams", func(c *ServerConfiguration) { tlsRoute(c) }, nil},
		{"tls upstreams and plain ones", func(c *ServerConfiguration) {
			c.Forward[1].Upstreams = []string{"tls://10.0.0.53", "10.0.0.53", "tls://[fd00::53]", "tls://fd00::54"}
		}, nil},
		{"tls settings", func(c *ServerConfiguration) {
			tlsRoute(c).TLS = &ForwardTLS{ServerName: "dns.example", CAFile: "/etc/dns/ca.pem", CertFile: "/etc/dns/c.pem", KeyFile: "/etc/dns/k.pem"}
		}, nil},
		{"tls upstream name", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"tls://dns.example"} },
			[]string{`forward[1].upstreams[0]: "tls://dns.example": not an address such as "10.0.0.53", "10.0.0.53:53" or "[fd00::53]:53"`}},
		{"tls upstream port", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"tls://10.0.0.1:0"} },
			[]string{`forward[1].upstreams[0]: "tls://10.0.0.1:0": invalid port`}},
		{"tls upstream twice", func(c *ServerConfiguration) {
			c.Forward[1].Upstreams = []string{"tls://10.0.0.1", "tls://10.0.0.1:853"}
		},
			[]string{`forward[1].upstreams[1]: "tls://10.0.0.1:853": the same upstream as upstreams[0]`}},
		{"tls and plain on one port", func(c *ServerConfiguration) { c.Forward[1].Upstreams = []string{"10.0.0.1:853", "tls://10.0.0.1"} },
			[]string{`forward[1].upstreams[1]: "tls://10.0.0.1": the same upstream as upstreams[0]`}},
		{"tls without tls upstreams", func(c *ServerConfiguration) { c.Forward[1].TLS = &ForwardTLS{ServerName: "dns.example"} },
			[]string{`forward[1].tls: set, but no upstream is tls://`}},
		{"tls server name", func(c *ServerConfiguration) { tlsRoute(c).TLS = &ForwardTLS{ServerName: "dns example"} },
			[]string{`forward[1].tls.serverName: "dns example": not a host name`}},
		{"tls cert without key", func(c *ServerConfiguration) { tlsRoute(c).TLS = &ForwardTLS{CertFile: "/c.pem"} },
			[]string{`forward[1].tls.keyFile: required with certFile`}},
		{"tls key without cert", func(c *ServerConfiguration) { tlsRoute(c).TLS = &ForwardTLS{KeyFile: "/k.pem"} },
			[]string{`forward[1].tls.certFile: required with keyFile`}},
		{"resolv.conf between addresses", func(c *ServerConfiguration) {
			c.Forward[0].Upstreams = []string{"10.0.0.53", "/etc/resolv.conf", "tls://10.0.0.54"}
		}, nil},
		{"two resolv.conf files", func(c *ServerConfiguration) {
			c.Forward[0].Upstreams = []string{"/etc/resolv.conf", "10.0.0.53", "/run/resolv.conf"}
		}, []string{`forward[0].upstreams[2]: "/run/resolv.conf": a second resolv.conf path (upstreams[0] is one): one file per route`}},
	})
}

func TestForwardUpstreamAccessors(t *testing.T) {
	r := ForwardRoute{Zone: ".", Upstreams: []string{"10.0.0.53", "/etc/resolv.conf", "tls://10.0.0.54", "[fd00::53]:5353"}}
	if got := r.ResolvConf(); got != "/etc/resolv.conf" {
		t.Errorf("ResolvConf() = %q", got)
	}
	want := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.53:53"), netip.MustParseAddrPort("[fd00::53]:5353")}
	if got := r.UpstreamAddrs(); !slices.Equal(got, want) {
		t.Errorf("UpstreamAddrs() = %v; want %v", got, want)
	}
}
