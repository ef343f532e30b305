package udpbatch

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Batch is the most datagrams one read takes from a socket (recvmmsg),
// and so the most replies one write sends (sendmmsg).
const Batch = 16

// Msg is one datagram of a batch and its reply.
type Msg struct {
	Buf  []byte         // the datagram as read, cut at the Conn's buffer size
	Peer netip.AddrPort // the client
	// Dst is the datagram's destination address, when the Conn reports it
	// (a wildcard bind): the reply's source.
	Dst netip.Addr
	// Out is the reply, sent by Write when Reply is set. Its buffer stays
	// with the Msg for the next datagram.
	Out   []byte
	Reply bool

	arena []byte // Buf's backing array
	raw   rawMsg // the batch path's own state (batch_linux.go)
}

// Zone is the client's IPv6 zone (a link-local address), where the batch
// path read it; "" otherwise.
func (m *Msg) Zone() string { return m.raw.zone() }

// packetIO reads and writes one socket's datagrams: a batch at a time, or
// one at a time.
type packetIO interface {
	// read fills ms[:n] with what it read, at least one datagram; it
	// blocks until one arrives or the socket's read deadline passes.
	read(ms []Msg) (n int, err error)
	// write sends the reply of every message of ms that has one, and
	// returns the last error (each datagram is tried).
	write(ms []Msg) error
}

// Conn is a UDP socket read and written a batch at a time.
type Conn struct {
	conn   *net.UDPConn
	io     packetIO
	ms     []Msg
	pktinf bool // the socket reports each datagram's destination (a wildcard bind)
}

// New prepares conn: Batch buffers of size bytes (one with perDatagram, or
// where batching is unavailable), and the destination address of every
// datagram when conn is bound to a wildcard address.
func New(conn *net.UDPConn, size int, perDatagram bool) (*Conn, error) {
	c := &Conn{conn: conn}
	if la, ok := conn.LocalAddr().(*net.UDPAddr); ok && la.IP.IsUnspecified() && oobSize > 0 {
		err6 := ipv6.NewPacketConn(conn).SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
		err4 := ipv4.NewPacketConn(conn).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
		if err6 != nil && err4 != nil {
			return nil, err4
		}
		c.pktinf = true
	}
	n := Batch
	if !perDatagram {
		c.io = newBatchIO(conn, c.pktinf)
	}
	if c.io == nil {
		c.io, n = &datagramIO{conn: conn, pktinf: c.pktinf}, 1
	}
	arena := make([]byte, n*size)
	c.ms = make([]Msg, n)
	for i := range c.ms {
		c.ms[i].arena = arena[i*size : (i+1)*size : (i+1)*size]
	}
	return c, nil
}

// UDPConn is the socket.
func (c *Conn) UDPConn() *net.UDPConn { return c.conn }

// Read blocks until at least one datagram arrives (or the socket's read
// deadline passes) and returns those read, valid until the next Read.
// Where the kernel refuses recvmmsg it goes on one datagram at a time.
func (c *Conn) Read() ([]Msg, error) {
	for {
		n, err := c.io.read(c.ms)
		if err != nil && batchUnavailable(err) {
			c.io, c.ms = &datagramIO{conn: c.conn, pktinf: c.pktinf}, c.ms[:1]
			continue
		}
		return c.ms[:n], err
	}
}

// Write sends the reply of every message of ms with Reply set and a
// non-empty Out (ms is what Read returned), from the address its query
// was sent to. It tries each and returns the last error.
func (c *Conn) Write(ms []Msg) error { return c.io.write(ms) }

// WriteTo sends b to peer, from dst when the Conn reports destinations.
// It is safe to call from any goroutine.
func (c *Conn) WriteTo(b []byte, peer *net.UDPAddr, dst netip.Addr) (int, error) {
	var oob []byte
	if c.pktinf && dst.IsValid() {
		var buf [oobSize]byte
		oob = buf[:putPktinfo(buf[:], dst)]
	}
	n, _, err := c.conn.WriteMsgUDP(b, oob, peer)
	return n, err
}

// datagramIO reads and writes one datagram at a time: where batching is
// unavailable.
type datagramIO struct {
	conn   *net.UDPConn
	pktinf bool
	oob    [oobSize]byte
	woob   [oobSize]byte
}

func (d *datagramIO) read(ms []Msg) (int, error) {
	m := &ms[0]
	var oob []byte
	if d.pktinf {
		oob = d.oob[:]
	}
	n, oobn, _, peer, err := d.conn.ReadMsgUDPAddrPort(m.arena, oob)
	if err != nil {
		return 0, err
	}
	m.Buf, m.Peer, m.Dst = m.arena[:n], peer, netip.Addr{}
	m.raw = rawMsg{}
	if oobn > 0 {
		m.Dst = parsePktinfo(d.oob[:oobn])
	}
	return 1, nil
}

func (d *datagramIO) write(ms []Msg) error {
	var last error
	for i := range ms {
		m := &ms[i]
		if !m.Reply || len(m.Out) == 0 {
			continue
		}
		var oob []byte
		if d.pktinf && m.Dst.IsValid() {
			oob = d.woob[:putPktinfo(d.woob[:], m.Dst)]
		}
		if _, _, err := d.conn.WriteMsgUDPAddrPort(m.Out, oob, m.Peer); err != nil {
			last = err
		}
	}
	return last
}
