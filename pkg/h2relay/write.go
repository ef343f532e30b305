package h2relay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// sendFrameLen bounds the DATA frames the relay writes itself: every peer
// accepts 16 KiB (the protocol's minimum SETTINGS_MAX_FRAME_SIZE).
const sendFrameLen = 16 << 10

// hangupCheck is how long a write to one peer may block before the relay
// asks whether the other peer has hung up (where that can be told: see
// hangup): a client gone while the relay is blocked writing to an upstream
// that stopped reading (or the reverse) ends the relay within this rather
// than at WriteTimeout.
const hangupCheck = 250 * time.Millisecond

// errPeerGone ends a write that blocked while the other peer hung up.
var errPeerGone = errors.New("the other peer hung up while this one was not reading")

// connWriter serialises whole writes of frames onto one connection: the
// frames relayed as read, and the frames the relay writes itself with an
// http2.Framer, which must not be used concurrently. Each write has a
// deadline (timeout, when set); stop shortens it for the last frames
// before the connection is closed. A write that blocks asks every
// hangupCheck whether the other peer has hung up, and fails if it has.
type connWriter struct {
	mu      sync.Mutex
	conn    net.Conn
	timeout time.Duration
	stopAt  atomic.Int64 // unix nanoseconds; set: no write may last longer
	lastSet time.Time    // when until was last moved (c.mu held)
	until   time.Time    // the writes under way end by then; zero: no bound (c.mu held)
	// peerGone reports that the other peer has hung up; nil where that
	// cannot be told, or a write cut short cannot be resumed.
	peerGone func() bool
	w        *bufio.Writer
	fr       *http2.Framer
}

// newConnWriter writes to conn; peer is the relay's other connection.
func newConnWriter(conn, peer net.Conn, timeout time.Duration) *connWriter {
	c := &connWriter{conn: conn, timeout: timeout, peerGone: hangup(conn, peer)}
	c.w = bufio.NewWriterSize(rawWriter{c}, 64<<10)
	c.fr = http2.NewFramer(c.w, nil)
	return c
}

// deadline moves until, the deadline of the writes that follow (c.mu
// held), at most every timeout/4, so that it stays between 3/4 timeout and
// timeout away; rawWriter sets the connection's deadline from it for each
// write to the socket.
func (c *connWriter) deadline() {
	if c.timeout <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(c.lastSet) < c.timeout/4 {
		return
	}
	c.lastSet = now
	c.until = now.Add(c.timeout)
}

// stop bounds every write, the one under way included, to d from now.
func (c *connWriter) stop(d time.Duration) {
	at := time.Now().Add(d)
	c.stopAt.Store(at.UnixNano())
	_ = c.conn.SetWriteDeadline(at)
}

// rawWriter is the connection under c's buffer (called with c.mu held).
type rawWriter struct{ c *connWriter }

// Write writes p by c's deadline (until, or stop's when earlier). With
// peerGone, the connection's deadline is at most hangupCheck away: a
// write still blocked then fails if the other peer has hung up and goes
// on otherwise.
func (w rawWriter) Write(p []byte) (int, error) {
	c := w.c
	done := 0
	for {
		dl, check := c.until, false
		if s := c.stopAt.Load(); s != 0 && (dl.IsZero() || s < dl.UnixNano()) {
			dl = time.Unix(0, s)
		}
		if c.peerGone != nil {
			if next := time.Now().Add(hangupCheck); dl.IsZero() || next.Before(dl) {
				dl, check = next, true
			}
		}
		_ = c.conn.SetWriteDeadline(dl)
		if s := c.stopAt.Load(); s != 0 && (dl.IsZero() || s < dl.UnixNano()) { // stop ran meanwhile: its deadline wins
			_ = c.conn.SetWriteDeadline(time.Unix(0, s))
			check = false
		}
		n, err := c.conn.Write(p[done:])
		done += n
		if err == nil || !check || !errors.Is(err, os.ErrDeadlineExceeded) {
			return done, err
		}
		if c.peerGone() {
			return done, errPeerGone
		}
	}
}

// write writes b, and flushes when flush is set: the relay direction
// feeding this writer is about to wait for input (its next frame is not
// complete yet), so nothing more goes out until more comes in.
func (c *connWriter) write(flush bool, b ...[]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline()
	for _, p := range b {
		if _, err := c.w.Write(p); err != nil {
			return err
		}
	}
	if flush {
		return c.w.Flush()
	}
	return nil
}

// frames writes frames with the Framer, and flushes as write does.
func (c *connWriter) frames(flush bool, fn func(*http2.Framer) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline()
	if err := fn(c.fr); err != nil {
		return err
	}
	if flush {
		return c.w.Flush()
	}
	return nil
}

// maxStatusMessage bounds the grpc-message of a rejection.
const maxStatusMessage = 2048

// trailersOnly is the header block of a gRPC "trailers only" response with
// status code and msg. Every field but ":status: 200" (an exact static
// table entry) is Sensitive, so the encoder writes literals "never
// indexed": the block leaves the peer's dynamic table, which the
// upstream's encoder drives, untouched.
func trailersOnly(code uint32, msg string) []byte {
	if len(msg) > maxStatusMessage {
		msg = msg[:maxStatusMessage]
	}
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range []hpack.HeaderField{
		{Name: ":status", Value: "200"},
		{Name: "content-type", Value: "application/grpc", Sensitive: true},
		{Name: "grpc-status", Value: strconv.FormatUint(uint64(code), 10), Sensitive: true},
		{Name: "grpc-message", Value: grpcMessageEncode(msg), Sensitive: true},
	} {
		_ = enc.WriteField(f) // writes to a bytes.Buffer do not fail
	}
	return b.Bytes()
}

// grpcMessageEncode percent-encodes a grpc-message value as the gRPC
// HTTP/2 protocol asks: bytes outside printable ASCII, and '%'.
func grpcMessageEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
