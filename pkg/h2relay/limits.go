package h2relay

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// Limits bound what a peer can make a Relay hold or do. A zero field
// takes its value from DefaultLimits.
type Limits struct {
	// MaxFrameSize caps the SETTINGS_MAX_FRAME_SIZE the relay honours. A
	// frame longer than its receiver announced (16 KiB unless it
	// announced more), or than MaxFrameSize, closes the connection
	// (FRAME_SIZE_ERROR). gRPC peers announce nothing and send 16 KiB
	// frames at most.
	MaxFrameSize int
	// MaxHeaderListSize bounds a header block, in either direction, both
	// as sent (HEADERS and CONTINUATION frames, frame headers and padding
	// included), counted as the frames arrive, and as decoded (RFC 9113
	// 6.5.2: name, value and 32 bytes per field). A client over it gets
	// GOAWAY (ENHANCE_YOUR_CALM) and loses the connection.
	MaxHeaderListSize int
	// MaxContinuations bounds the CONTINUATION frames of one header
	// block, in either direction; a client over it gets GOAWAY
	// (ENHANCE_YOUR_CALM).
	MaxContinuations int
	// MaxControlFrames bounds the client's control frames (RST_STREAM
	// frames, and PING and SETTINGS frames, acknowledgements included,
	// that do not follow a HEADERS or DATA frame sent to it, as grpc-go's
	// server counts pings). Each takes a token from a bucket of
	// MaxControlFrames that refills at MaxControlFrames per 10 seconds;
	// a client that finds it empty gets GOAWAY (ENHANCE_YOUR_CALM) and
	// loses the connection.
	MaxControlFrames int
	// MaxHeldRequest bounds a held request's message (without gRPC's
	// 5-byte prefix). A request that announces or sends more is answered
	// ResourceExhausted (trailers only, then RST_STREAM NO_ERROR) and its
	// upstream stream is reset (CANCEL); no flow-control credit is given
	// for the bytes over it.
	MaxHeldRequest int
	// MaxHeld bounds the requests one relay holds at once (being received,
	// rewritten or sent on). A call beyond it, or beyond the HeldSlots
	// shared with other relays (WithHeldSlots), is answered
	// ResourceExhausted at once. The default covers kubelet's default
	// max-pods (110) creating sandboxes at once.
	MaxHeld int
	// WriteTimeout bounds one write to either peer: a peer that does not
	// read for that long loses the connection. Negative: no bound.
	WriteTimeout time.Duration
}

// DefaultLimits are the limits a Relay applies unless WithLimits says
// otherwise.
var DefaultLimits = Limits{
	MaxFrameSize:      1 << 20, // the largest frame a relay reads, whatever a peer announces
	MaxHeaderListSize: 1 << 20, // x/net/http2's server default (http.DefaultMaxHeaderBytes)
	MaxContinuations:  128,     // a 1 MiB header block in 8 KiB frames
	MaxControlFrames:  1000,    // a burst of 1000, then 100 a second
	MaxHeldRequest:    1 << 20, // a real RunPodSandbox request is a few KiB; a pod's annotations at most 256 KiB
	MaxHeld:           128,
	WriteTimeout:      30 * time.Second,
}

// withDefaults fills l's zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxFrameSize, d.MaxFrameSize)
	set(&l.MaxHeaderListSize, d.MaxHeaderListSize)
	set(&l.MaxContinuations, d.MaxContinuations)
	set(&l.MaxControlFrames, d.MaxControlFrames)
	set(&l.MaxHeldRequest, d.MaxHeldRequest)
	set(&l.MaxHeld, d.MaxHeld)
	l.MaxFrameSize = min(l.MaxFrameSize, maxFrameLen)
	switch {
	case l.WriteTimeout == 0:
		l.WriteTimeout = d.WriteTimeout
	case l.WriteTimeout < 0:
		l.WriteTimeout = 0
	}
	return l
}

// controlWindow is the time in which a client's control-frame bucket
// refills completely.
const controlWindow = 10 * time.Second

// bucket is a token bucket of burst tokens refilling at burst per
// controlWindow. It is used by one goroutine.
type bucket struct {
	tokens, burst float64
	last          time.Time
}

func newBucket(burst int) *bucket {
	return &bucket{tokens: float64(burst), burst: float64(burst)}
}

// take takes a token at now and reports whether there was one.
func (b *bucket) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.burst/controlWindow.Seconds())
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// connError is a client's violation: the relay sends the client GOAWAY
// with code, then closes the connection.
type connError struct {
	code http2.ErrCode
	err  error
}

func (e *connError) Error() string { return fmt.Sprintf("%v (%v)", e.err, e.code) }
func (e *connError) Unwrap() error { return e.err }

// clientError wraps err as a client violation answered with code.
func clientError(code http2.ErrCode, err error) error { return &connError{code: code, err: err} }

// HeldSlots bounds the requests held at once by every relay that shares
// it (WithHeldSlots), so that memory held is bounded across connections:
// at most n × MaxHeldRequest bytes.
type HeldSlots struct {
	n   atomic.Int64
	max int64
}

// NewHeldSlots returns slots for n requests held at once.
func NewHeldSlots(n int) *HeldSlots { return &HeldSlots{max: int64(n)} }

// InUse is the number of requests held now.
func (s *HeldSlots) InUse() int { return int(s.n.Load()) }

func (s *HeldSlots) acquire() bool {
	if s == nil {
		return true
	}
	if s.n.Add(1) > s.max {
		s.n.Add(-1)
		return false
	}
	return true
}

func (s *HeldSlots) release() {
	if s != nil {
		s.n.Add(-1)
	}
}
