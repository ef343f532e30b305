package nodenet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Links puts addresses on interfaces.
type Links interface {
	// Exists reports whether the interface name exists.
	Exists(name string) (bool, error)
	// AddDummy makes a dummy interface name and sets it up; it fails on a
	// kernel without the dummy link type.
	AddDummy(name string) error
	// Delete removes the interface name, with its addresses.
	Delete(name string) error
	// Addrs returns the addresses of the interface dev.
	Addrs(dev string) ([]netip.Addr, error)
	// AddAddr puts ip on dev as a host address (/32 or /128).
	AddAddr(dev string, ip netip.Addr) error
	// DelAddr removes ip from dev.
	DelAddr(dev string, ip netip.Addr) error
}

// NetlinkLinks is Links on rtnetlink, in one network namespace.
type NetlinkLinks struct {
	h *netlink.Handle
}

var _ Links = (*NetlinkLinks)(nil)

// NewNetlinkLinks returns the Links of the namespace nsFD (-1: the current
// one). Close it when done.
func NewNetlinkLinks(nsFD int) (*NetlinkLinks, error) {
	ns := netns.None()
	if nsFD >= 0 {
		ns = netns.NsHandle(nsFD)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &NetlinkLinks{h: h}, nil
}

// Close releases the netlink sockets.
func (l *NetlinkLinks) Close() { l.h.Close() }

func (l *NetlinkLinks) link(name string) (netlink.Link, error) {
	ln, err := l.h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	return ln, nil
}

// Exists implements Links.
func (l *NetlinkLinks) Exists(name string) (bool, error) {
	_, err := l.h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &notFound), errors.Is(err, unix.ENODEV):
		return false, nil
	}
	return false, fmt.Errorf("interface %q: %w", name, err)
}

// AddDummy implements Links.
func (l *NetlinkLinks) AddDummy(name string) error {
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := l.h.LinkAdd(d); err != nil {
		return fmt.Errorf("add dummy interface %q: %w", name, err)
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
	if err := l.h.LinkDel(ln); err != nil {
		return fmt.Errorf("delete interface %q: %w", name, err)
	}
	return nil
}

// Addrs implements Links.
func (l *NetlinkLinks) Addrs(dev string) ([]netip.Addr, error) {
	ln, err := l.link(dev)
	if err != nil {
		return nil, err
	}
	as, err := l.h.AddrList(ln, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses of %q: %w", dev, err)
	}
	var out []netip.Addr
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

func hostNet(ip netip.Addr) *netlink.Addr {
	ip = ip.Unmap()
	return &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}}
}

// AddAddr implements Links.
func (l *NetlinkLinks) AddAddr(dev string, ip netip.Addr) error {
	ln, err := l.link(dev)
	if err != nil {
		return err
	}
	if err := l.h.AddrAdd(ln, hostNet(ip)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %q: %w", ip, dev, err)
	}
	if ln.Attrs().Flags&net.FlagUp == 0 {
		if err := l.h.LinkSetUp(ln); err != nil {
			return fmt.Errorf("set %q up: %w", dev, err)
		}
	}
	return nil
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
