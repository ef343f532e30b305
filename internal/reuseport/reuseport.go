// Package reuseport sets SO_REUSEPORT, so a new instance of a server can
// bind the addresses an old one still serves.
//
// A rolling restart with surge then has no gap. The DNS listeners (Listen)
// and the metrics/health listener of `serve` share it. A stopping server
// hands its share of an address's datagrams over with Detach, and reads
// what it had queued until Pending says none is left.
package reuseport

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Control is a net.ListenConfig.Control that sets SO_REUSEPORT before the
// socket is bound. Every socket sharing an address must set it, and on
// Linux belong to the same user.
func Control(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_REUSEPORT: %w", serr)
	}
	return nil
}

// Listen binds n UDP sockets and one TCP socket on addr, a DNS server's
// listen address, of the family fam ("4", "6", or "" for Go's choice:
// v1alpha1.BindFamily). TCP is bound first, with SO_REUSEPORT when reuse is set;
// then the UDP sockets, with SO_REUSEPORT when reuse is set or n is over
// one. With port 0 it retries until both transports get the same free
// port.
func Listen(ctx context.Context, addr, fam string, n int, reuse bool) ([]*net.UDPConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	var tcp, udp net.ListenConfig
	if reuse {
		tcp.Control = Control
	}
	if reuse || n > 1 {
		udp.Control = Control
	}
	var lastErr error
	for range 20 {
		a := addr
		if port == "0" && udp.Control != nil {
			// Linux may give a SO_REUSEPORT bind to UDP port 0 a port that
			// another SO_REUSEPORT socket of the same user holds, and the two
			// would then share its datagrams: take the port that plain binds
			// get for both transports, release it and bind that one.
			pcs, ln, err := Listen(ctx, addr, fam, 1, false)
			if err != nil {
				return nil, nil, err
			}
			a = net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
			pcs[0].Close()
			ln.Close()
		}
		ln, err := tcp.Listen(ctx, "tcp"+fam, a)
		if err != nil {
			if a != addr { // the probed port was taken meanwhile
				lastErr = err
				continue
			}
			return nil, nil, err
		}
		a = net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		pcs, err := listenUDP(ctx, &udp, "udp"+fam, a, n)
		if err == nil {
			return pcs, ln, nil
		}
		ln.Close()
		lastErr = err
		if port != "0" {
			break
		}
	}
	return nil, nil, lastErr
}

// listenUDP binds n UDP sockets of network on addr, or none.
func listenUDP(ctx context.Context, lc *net.ListenConfig, network, addr string, n int) ([]*net.UDPConn, error) {
	pcs := make([]*net.UDPConn, 0, n)
	for range n {
		pc, err := lc.ListenPacket(ctx, network, addr)
		if err != nil {
			for _, pc := range pcs {
				pc.Close()
			}
			return nil, err
		}
		pcs = append(pcs, pc.(*net.UDPConn))
	}
	return pcs, nil
}

// Detach connects a bound UDP socket to its own address (loopback for a
// wildcard one), so that the kernel gives it no more datagrams from
// clients: those go to the other sockets sharing the address (a new
// instance's), or are refused when there is none. What the socket had
// queued stays there to be read, and replies can still be sent to any
// client: Go does not know the socket is connected. A server that stops
// detaches its sockets first, so that no datagram waits in a socket that
// is about to close.
func Detach(conn *net.UDPConn) error {
	la, ok := conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return fmt.Errorf("detach: local address %v", conn.LocalAddr())
	}
	ip := la.AddrPort().Addr()
	var zone uint32
	if la.Zone != "" {
		ifi, err := net.InterfaceByName(la.Zone)
		if err != nil {
			return fmt.Errorf("detach: %w", err)
		}
		zone = uint32(ifi.Index)
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	var cerr error
	err = rc.Control(func(fd uintptr) {
		dom, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		if err != nil {
			cerr = err
			return
		}
		var sa unix.Sockaddr
		if dom == unix.AF_INET {
			a := [4]byte{127, 0, 0, 1}
			if !ip.IsUnspecified() {
				a = ip.Unmap().As4()
			}
			sa = &unix.SockaddrInet4{Port: la.Port, Addr: a}
		} else {
			a := [16]byte{15: 1} // ::1
			if !ip.IsUnspecified() {
				a = ip.As16()
			}
			sa = &unix.SockaddrInet6{Port: la.Port, Addr: a, ZoneId: zone}
		}
		cerr = unix.Connect(int(fd), sa)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("detach %v: %w", la, err)
	}
	return nil
}

// Pending reports whether a datagram waits to be read from conn (a
// detached socket's reader reads until none does).
func Pending(conn *net.UDPConn) bool {
	rc, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		return false
	}
	return err == nil && n > 0
}
