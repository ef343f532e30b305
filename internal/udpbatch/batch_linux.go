package udpbatch

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dnsconfigurer/dnsconfigurer/internal/unsafeptr"
)

// mmsghdr is struct mmsghdr: a msghdr and the length the call set (Go
// pads it as C does).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// sockaddrSize holds a struct sockaddr_in6, and so a sockaddr_in.
const sockaddrSize = unix.SizeofSockaddrInet6

// rawMsg is a datagram's client address as the kernel gave it, sent back
// as is with the reply, and the control messages read with it.
type rawMsg struct {
	name    [sockaddrSize]byte
	namelen uint32
	oob     [oobSize]byte
	woob    [oobSize]byte
}

// zone is the client's IPv6 zone (a link-local address): the name of the
// interface of the address's scope id.
func (r *rawMsg) zone() string {
	if binary.NativeEndian.Uint16(r.name[:]) != unix.AF_INET6 || r.namelen < sockaddrSize {
		return ""
	}
	id := binary.NativeEndian.Uint32(r.name[24:])
	if id == 0 {
		return ""
	}
	if ifi, err := net.InterfaceByIndex(int(id)); err == nil {
		return ifi.Name
	}
	return strconv.Itoa(int(id))
}

// batchIO reads and writes a socket's datagrams Batch at a time.
type batchIO struct {
	rc     syscall.RawConn
	pktinf bool
	rh, wh [Batch]mmsghdr
	riov   [Batch]unix.Iovec
	wiov   [Batch]unix.Iovec

	// The call in progress, for the function RawConn runs (made once: a
	// method value allocates): recvmmsg or sendmmsg over cur, and what it
	// returned.
	trap  uintptr
	cur   []mmsghdr
	n     int
	errno syscall.Errno
	callF func(fd uintptr) bool
}

// newBatchIO is the batch path of conn, or nil where it has none.
func newBatchIO(conn *net.UDPConn, pktinf bool) packetIO {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil
	}
	b := &batchIO{rc: rc, pktinf: pktinf}
	b.callF = b.call
	return b
}

// call makes the call set in b on fd; false to wait until fd is ready.
//
// It is a raw system call: the runtime is not told that the goroutine
// enters the kernel. The socket is non-blocking (Go's net package makes it
// so), so recvmmsg returns at once when nothing waits and sendmmsg when
// the send buffer is full; neither holds the thread longer than the copy
// of one batch. Telling the scheduler costs about a tenth of the node-local
// stage's CPU per cached answer (10.0-12.3 µs against 9.4-10.5 µs, four
// side-by-side runs each).
func (b *batchIO) call(fd uintptr) bool {
	for {
		n, e := unsafeptr.RawSyscallSlice(b.trap, fd, b.cur)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		b.n, b.errno = int(n), e
		return true
	}
}

func (b *batchIO) read(ms []Msg) (int, error) {
	want := min(len(ms), Batch)
	for i := range want {
		m, h := &ms[i], &b.rh[i]
		b.riov[i].Base = &m.arena[0]
		b.riov[i].SetLen(len(m.arena))
		h.hdr = unix.Msghdr{Name: &m.raw.name[0], Namelen: sockaddrSize, Iov: &b.riov[i]}
		h.hdr.SetIovlen(1)
		if b.pktinf {
			h.hdr.Control = &m.raw.oob[0]
			h.hdr.SetControllen(oobSize)
		}
		h.len = 0
	}
	b.trap, b.cur, b.n, b.errno = unix.SYS_RECVMMSG, b.rh[:want], 0, 0
	err := b.rc.Read(b.callF)
	b.cur = nil
	if err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", b.errno)
	}
	n := b.n
	for i := range n {
		m, h := &ms[i], &b.rh[i]
		m.Buf = m.arena[:h.len]
		m.raw.namelen = h.hdr.Namelen
		m.Peer = sockaddrPort(m.raw.name[:], h.hdr.Namelen)
		m.Dst = netip.Addr{}
		if b.pktinf && h.hdr.Controllen > 0 {
			m.Dst = parsePktinfo(m.raw.oob[:h.hdr.Controllen])
		}
	}
	return n, nil
}

func (b *batchIO) write(ms []Msg) error {
	k := 0
	for i := range ms {
		m := &ms[i]
		if !m.Reply || len(m.Out) == 0 {
			continue
		}
		h := &b.wh[k]
		b.wiov[k].Base = &m.Out[0]
		b.wiov[k].SetLen(len(m.Out))
		h.hdr = unix.Msghdr{Name: &m.raw.name[0], Namelen: m.raw.namelen, Iov: &b.wiov[k]}
		h.hdr.SetIovlen(1)
		if b.pktinf && m.Dst.IsValid() {
			h.hdr.Control = &m.raw.woob[0]
			h.hdr.SetControllen(putPktinfo(m.raw.woob[:], m.Dst))
		}
		h.len = 0
		k++
	}
	var last error
	b.trap = unix.SYS_SENDMMSG
	for b.cur = b.wh[:k]; len(b.cur) > 0; b.cur = b.cur[b.n:] {
		b.n, b.errno = 0, 0
		if err := b.rc.Write(b.callF); err != nil {
			b.cur = nil
			return err // the socket is closed
		}
		if b.errno != 0 {
			// The first datagram failed: skip it, send the others.
			last = os.NewSyscallError("sendmmsg", b.errno)
			b.n = 1
		}
	}
	return last
}

// batchUnavailable is a read error of a kernel or sandbox without
// recvmmsg.
func batchUnavailable(err error) bool {
	return errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)
}

// sockaddrPort is the address of a struct sockaddr_in or sockaddr_in6 (the
// zone left out).
func sockaddrPort(b []byte, n uint32) netip.AddrPort {
	if n < 2 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port)
	}
	return netip.AddrPort{}
}

// oobSize holds the control messages a datagram is read with: an
// IPV6_PKTINFO and an IP_PKTINFO.
const oobSize = 128

// The control messages' data: struct in_pktinfo {int ipi_ifindex; struct
// in_addr ipi_spec_dst, ipi_addr} and struct in6_pktinfo {struct in6_addr
// ipi6_addr; int ipi6_ifindex}.
const (
	inPktinfoSize  = 12
	in6PktinfoSize = 20
)

// parsePktinfo is the destination address of a datagram from its control
// messages, IPV6_PKTINFO first (miekg/dns's parseDstFromOOB).
func parsePktinfo(oob []byte) netip.Addr {
	var v4, v6 netip.Addr
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		var l int
		if unix.SizeofCmsghdr == 16 {
			l = int(binary.NativeEndian.Uint64(oob))
		} else {
			l = int(binary.NativeEndian.Uint32(oob))
		}
		lenSize := unix.SizeofCmsghdr - 8
		level := int32(binary.NativeEndian.Uint32(oob[lenSize:]))
		typ := int32(binary.NativeEndian.Uint32(oob[lenSize+4:]))
		if l < hdr || l > len(oob) {
			break
		}
		data := oob[hdr:l]
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(data) >= inPktinfoSize:
			v4 = netip.AddrFrom4([4]byte(data[8:12]))
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(data) >= in6PktinfoSize:
			v6 = netip.AddrFrom16([16]byte(data[:16]))
		}
		next := unix.CmsgSpace(l - hdr)
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	if v6.IsValid() && !v6.IsUnspecified() {
		return v6
	}
	return v4
}

// putPktinfo writes into b the control message that makes dst the source
// of a reply, and returns its length: IP_PKTINFO for an IPv4 (or
// IPv4-mapped) address, else IPV6_PKTINFO (miekg/dns's correctSource).
func putPktinfo(b []byte, dst netip.Addr) int {
	level, typ, size := int32(unix.IPPROTO_IPV6), int32(unix.IPV6_PKTINFO), in6PktinfoSize
	if dst.Unmap().Is4() {
		level, typ, size = unix.IPPROTO_IP, unix.IP_PKTINFO, inPktinfoSize
	}
	space := unix.CmsgSpace(size)
	clear(b[:space])
	if unix.SizeofCmsghdr == 16 {
		binary.NativeEndian.PutUint64(b, uint64(unix.CmsgLen(size)))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(unix.CmsgLen(size)))
	}
	lenSize := unix.SizeofCmsghdr - 8
	binary.NativeEndian.PutUint32(b[lenSize:], uint32(level))
	binary.NativeEndian.PutUint32(b[lenSize+4:], uint32(typ))
	data := b[unix.CmsgLen(0):]
	if size == inPktinfoSize {
		a := dst.Unmap().As4()
		copy(data[4:8], a[:]) // ipi_spec_dst; ifindex 0
	} else {
		a := dst.As16()
		copy(data[:16], a[:]) // ifindex 0
	}
	return space
}
