package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Marks of what this project puts on the node, read back so that it
// removes only that.
const (
	// LinkAlias is the alias (IFLA_IFALIAS) of an interface this project
	// made. An interface of the same name without it is someone else's
	// (NodeLocal DNSCache's node-cache makes "nodelocaldns" too).
	LinkAlias = "dnsconfigurer"
	// AddrProto is the origin (IFA_PROTO) of an address this project
	// added. Linux 6.1 and later keep it; older kernels drop it, and then
	// an address counts as ours only in the process that added it.
	AddrProto = 0xdc
)

// ifaProto is IFA_PROTO (Linux 6.1), which x/sys/unix does not name.
const ifaProto = 11

// Addr is an address of an interface.
type Addr struct {
	IP netip.Addr
	// Ours: the address carries AddrProto.
	Ours bool
}

// Links puts addresses on interfaces.
type Links interface {
	// Lookup reports whether the interface name exists and whether it
	// carries LinkAlias.
	Lookup(name string) (found, ours bool, err error)
	// AddDummy makes a dummy interface name with LinkAlias and sets it
	// up; it fails on a kernel without the dummy link type.
	AddDummy(name string) error
	// Delete removes the interface name, with its addresses; it refuses
	// an interface without LinkAlias.
	Delete(name string) error
	// Addrs returns the addresses of the interface dev.
	Addrs(dev string) ([]Addr, error)
	// AddAddr puts ip on dev as a host address (/32 or /128) with
	// AddrProto, and sets dev up.
	AddAddr(dev string, ip netip.Addr) error
	// DelAddr removes ip from dev.
	DelAddr(dev string, ip netip.Addr) error
}

// NetlinkLinks is Links on rtnetlink, in one network namespace.
type NetlinkLinks struct {
	h *netlink.Handle
	// s carries the address requests netlink.Handle cannot make (it
	// neither sets nor reads IFA_PROTO).
	s *nl.SocketHandle
}

var _ Links = (*NetlinkLinks)(nil)

// NewNetlinkLinks returns the Links of the namespace nsFD (-1: the current
// one). Close it when done.
func NewNetlinkLinks(nsFD int) (*NetlinkLinks, error) {
	ns := netns.None()
	if nsFD >= 0 {
		ns = netns.NsHandle(nsFD)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	tv := unix.Timeval{Sec: 10}
	if err := errors.Join(s.SetSendTimeout(&tv), s.SetReceiveTimeout(&tv)); err != nil {
		h.Close()
		s.Close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &NetlinkLinks{h: h, s: &nl.SocketHandle{Socket: s}}, nil
}

// Close releases the netlink sockets.
func (l *NetlinkLinks) Close() {
	l.h.Close()
	l.s.Close()
}

func (l *NetlinkLinks) link(name string) (netlink.Link, error) {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	return ln, nil
}

// Lookup implements Links.
func (l *NetlinkLinks) Lookup(name string) (found, ours bool, err error) {
	ln, err := l.h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	switch {
	case err == nil:
		return true, ln.Attrs().Alias == LinkAlias, nil
	case errors.As(err, &notFound), errors.Is(err, unix.ENODEV):
		return false, false, nil
	}
	return false, false, fmt.Errorf("interface %q: %w", name, err)
}

// AddDummy implements Links. The kernel ignores an alias given when a
// link is made, so it is set right after: a process killed in between
// leaves an interface it will not delete.
func (l *NetlinkLinks) AddDummy(name string) error {
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := l.h.LinkAdd(d); err != nil {
		return fmt.Errorf("add dummy interface %q: %w", name, err)
	}
	if err := l.h.LinkSetAlias(d, LinkAlias); err != nil {
		return fmt.Errorf("mark interface %q: %w", name, err)
	}
	if err := l.h.LinkSetUp(d); err != nil {
		return fmt.Errorf("set %q up: %w", name, err)
	}
	return nil
}

// Delete implements Links.
func (l *NetlinkLinks) Delete(name string) error {
	ln, err := l.link(name)
	if err != nil {
		return err
	}
	if ln.Attrs().Alias != LinkAlias {
		return fmt.Errorf("delete interface %q: not made by dnsconfigurer (alias %q)", name, ln.Attrs().Alias)
	}
	if err := l.h.LinkDel(ln); err != nil {
		return fmt.Errorf("delete interface %q: %w", name, err)
	}
	return nil
}

func (l *NetlinkLinks) request(typ, flags int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(typ, flags)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: l.s}
	return req
}

// Addrs implements Links.
func (l *NetlinkLinks) Addrs(dev string) ([]Addr, error) {
	ln, err := l.link(dev)
	if err != nil {
		return nil, err
	}
	var msgs [][]byte
	for range 3 { // a dump that changed while read is read again
		req := l.request(unix.RTM_GETADDR, unix.NLM_F_DUMP)
		req.AddData(nl.NewIfAddrmsg(unix.AF_UNSPEC))
		msgs, err = req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWADDR)
		if !errors.Is(err, nl.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("addresses of %q: %w", dev, err)
	}
	var out []Addr
	for _, m := range msgs {
		if len(m) < unix.SizeofIfAddrmsg || int(nl.DeserializeIfAddrmsg(m).Index) != ln.Attrs().Index {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofIfAddrmsg:])
		if err != nil {
			return nil, fmt.Errorf("addresses of %q: %w", dev, err)
		}
		var local, addr []byte
		proto := -1
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFA_LOCAL:
				local = a.Value
			case unix.IFA_ADDRESS:
				addr = a.Value
			case ifaProto:
				if len(a.Value) == 1 {
					proto = int(a.Value[0])
				}
			}
		}
		if local == nil { // IPv6 has IFA_ADDRESS only
			local = addr
		}
		if ip, ok := netip.AddrFromSlice(local); ok {
			out = append(out, Addr{IP: ip.Unmap(), Ours: proto == AddrProto})
		}
	}
	return out, nil
}

// AddAddr implements Links.
func (l *NetlinkLinks) AddAddr(dev string, ip netip.Addr) error {
	ln, err := l.link(dev)
	if err != nil {
		return err
	}
	ip = ip.Unmap()
	family := unix.AF_INET
	if ip.Is6() {
		family = unix.AF_INET6
	}
	msg := nl.NewIfAddrmsg(family)
	msg.Index = uint32(ln.Attrs().Index)
	msg.Prefixlen = uint8(ip.BitLen())
	if ip.Is6() {
		// Without NODAD an IPv6 address is tentative until the kernel's
		// DAD work runs, even where it skips DAD (lo, a dummy): a bind in
		// that window fails with "cannot assign requested address".
		msg.Flags |= unix.IFA_F_NODAD
	}
	req := l.request(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFA_LOCAL, ip.AsSlice()))
	req.AddData(nl.NewRtAttr(unix.IFA_ADDRESS, ip.AsSlice()))
	req.AddData(nl.NewRtAttr(ifaProto, []byte{AddrProto}))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %q: %w", ip, dev, err)
	}
	if ln.Attrs().Flags&net.FlagUp == 0 {
		if err := l.h.LinkSetUp(ln); err != nil {
			return fmt.Errorf("set %q up: %w", dev, err)
		}
	}
	return nil
}

func hostNet(ip netip.Addr) *netlink.Addr {
	ip = ip.Unmap()
	return &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}}
}

// DelAddr implements Links.
func (l *NetlinkLinks) DelAddr(dev string, ip netip.Addr) error {
	ln, err := l.link(dev)
	if err != nil {
		return err
	}
	if err := l.h.AddrDel(ln, hostNet(ip)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("remove %s from %q: %w", ip, dev, err)
	}
	return nil
}
