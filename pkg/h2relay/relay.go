package h2relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Rewriter is the hook for the one method whose requests a Relay holds.
type Rewriter interface {
	// Rewrite gets a held call's request message (without gRPC's 5-byte
	// prefix) and returns the message to send upstream instead. A result
	// equal to msg sends the original bytes. An error rejects the call:
	// the client is answered with the error's gRPC status (status.Convert)
	// and the upstream stream is reset. ctx ends with the call (its
	// grpc-timeout, a reset, the connection).
	Rewrite(ctx context.Context, msg []byte) ([]byte, error)
	// Malformed is asked about a held request body that is not exactly
	// one uncompressed gRPC message (err says how): nil sends it upstream
	// unchanged, an error rejects the call as Rewrite's does.
	Malformed(err error) error
}

// ObserveFunc is told of every call that ends: its full method (the
// :path header), its gRPC status (Unknown when the upstream ended the
// stream without one, Canceled for a reset, Unavailable when the
// connection closed under it) and its duration. A call the upstream ends
// is observed before its last frame is forwarded, so a client holding the
// answer finds the call counted.
type ObserveFunc func(method string, code codes.Code, d time.Duration)

// Option configures a Relay.
type Option func(*Relay)

// WithRewrite holds the requests of method (a full method name,
// "/package.Service/Method") and rewrites them with rw.
func WithRewrite(method string, rw Rewriter) Option {
	return func(r *Relay) { r.method, r.rw = method, rw }
}

// WithObserver sets the function told of each call that ends.
func WithObserver(fn ObserveFunc) Option { return func(r *Relay) { r.observe = fn } }

// WithLimits sets the relay's limits; a zero field takes its
// DefaultLimits value.
func WithLimits(l Limits) Option { return func(r *Relay) { r.lim = l } }

// WithHeldSlots shares a bound on held requests with other relays.
func WithHeldSlots(s *HeldSlots) Option { return func(r *Relay) { r.slots = s } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(r *Relay) { r.log = l } }

// Relay is one client connection spliced to one upstream connection at
// the HTTP/2 frame level. Frames pass through as they are read, byte for
// byte, except the request DATA of the rewritten method's streams, which
// is held until the request is complete, rewritten, and sent on as new
// DATA frames. Header blocks in both directions are HPACK-decoded (which
// keeps the decoders' tables in step with the peers'), to find the
// rewritten method's streams and to observe calls by method and status.
type Relay struct {
	client, upstream net.Conn
	clientW          *connWriter
	upstreamW        *connWriter
	ctx              context.Context // ends when the relay closes
	cancel           context.CancelFunc

	method  string
	rw      Rewriter
	observe ObserveFunc
	lim     Limits
	log     *slog.Logger

	// HPACK table sizes each side's decoder may be told to use, set from
	// the other direction's SETTINGS.
	reqTable, respTable atomic.Uint32
	// The longest frame each side may send: what the other side
	// announced (SETTINGS_MAX_FRAME_SIZE), at most Limits.MaxFrameSize.
	reqFrame, respFrame atomic.Uint32
	// fed is set when a HEADERS or DATA frame went to the client: its
	// next PING or SETTINGS is then not counted as a control frame.
	fed atomic.Bool
	// The upstream's PING and SETTINGS frames the client has yet to
	// acknowledge: its acknowledgements of them are not counted.
	pings, settings atomic.Int64

	closing  atomic.Bool    // Close has begun
	evicting atomic.Bool    // Evict has begun: nothing more goes upstream
	wg       sync.WaitGroup // goroutines other than Run's two; Add only under mu while !closed

	mu       sync.Mutex
	cond     *sync.Cond
	streams  map[uint32]*stream
	held     int // streams holding a request (MaxHeld)
	slots    *HeldSlots
	lastID   uint32 // highest stream the client opened
	closed   bool
	upInit   int64 // the upstream's SETTINGS_INITIAL_WINDOW_SIZE
	owed     int64 // connection-level bytes the relay sent on the client's behalf, withheld from the upstream's next grants
	draining bool
	goneAway uint32        // when draining, the last stream its GOAWAY let through
	idle     chan struct{} // closed when draining and no stream is left
	active   time.Time     // when the last call began or ended (or New ran)
}

// stream is one call on a relay.
type stream struct {
	method  string
	start   time.Time
	held    bool // the rewritten method: request DATA is held
	counted bool // counts towards Relay.held: its body is (or will be) held
	body    []byte
	sent    bool  // the held request has been dealt with
	window  int64 // the upstream's stream window for the relay's own DATA
	ctx     context.Context
	cancel  context.CancelFunc
	done    bool
	seen    bool // the call has been observed
}

// HTTP/2's initial flow-control window, HPACK table size and frame size
// (RFC 9113 6.5.2).
const (
	defaultWindow      = 65535
	defaultHeaderTable = 4096
	defaultFrameSize   = 16 << 10
)

// goAwayWait bounds the GOAWAY written to a client that broke a limit
// before its connection is closed.
const goAwayWait = time.Second

// New returns a relay from client (which must speak first: the HTTP/2
// client preface) to upstream. It relays nothing before Run.
func New(client, upstream net.Conn, opts ...Option) *Relay {
	r := &Relay{client: client, upstream: upstream,
		streams: map[uint32]*stream{}, upInit: defaultWindow, log: slog.Default(), active: time.Now()}
	for _, o := range opts {
		o(r)
	}
	r.lim = r.lim.withDefaults()
	r.clientW = newConnWriter(client, upstream, r.lim.WriteTimeout)
	r.upstreamW = newConnWriter(upstream, client, r.lim.WriteTimeout)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.cond = sync.NewCond(&r.mu)
	r.reqTable.Store(defaultHeaderTable)
	r.respTable.Store(defaultHeaderTable)
	r.reqFrame.Store(uint32(min(defaultFrameSize, r.lim.MaxFrameSize)))
	r.respFrame.Store(uint32(min(defaultFrameSize, r.lim.MaxFrameSize)))
	return r
}

// Run relays until either side closes the connection, Close is called or
// ctx is done, then closes both connections and waits for the relay's
// goroutines (a Rewriter must return when its context is done). It
// returns why the relay ended: nil for a connection closed cleanly or by
// Close. A client that broke a limit or the protocol is sent GOAWAY
// first (for at most a second).
func (r *Relay) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, r.Close)
	defer stop()
	type result struct {
		client bool
		err    error
	}
	errc := make(chan result, 2)
	go func() { errc <- result{true, r.fromClient()} }()
	go func() { errc <- result{false, r.fromUpstream()} }()
	res := <-errc
	var ce *connError
	if res.client && errors.As(res.err, &ce) && !r.closing.Load() {
		r.log.Debug("relay: client broke a limit", "err", res.err)
		r.goAway(ce.code, ce.err.Error())
	}
	r.Close()
	<-errc
	r.wg.Wait()
	if errors.Is(res.err, io.EOF) || errors.Is(res.err, net.ErrClosed) {
		return nil
	}
	return res.err
}

// goAway sends the client GOAWAY with code and debug, waiting at most
// goAwayWait (and cutting the write under way, if any, as short).
func (r *Relay) goAway(code http2.ErrCode, debug string) {
	r.mu.Lock()
	last := r.lastID
	r.mu.Unlock()
	r.clientW.stop(goAwayWait)
	_ = r.clientW.frames(true, func(f *http2.Framer) error { return f.WriteGoAway(last, code, []byte(debug)) })
}

// Close closes both connections at once, which ends every write under
// way; the calls in flight end with Unavailable. It does not wait for
// anything the peers do. It is safe to call more than once.
func (r *Relay) Close() {
	if !r.closing.CompareAndSwap(false, true) {
		return
	}
	r.cancel()
	r.client.Close()
	r.upstream.Close()
	r.mu.Lock()
	r.closed = true
	left := r.streams
	r.streams = map[uint32]*stream{}
	r.held = 0
	for _, st := range left {
		if st.counted {
			st.counted = false
			r.slots.release()
		}
	}
	r.cond.Broadcast()
	for _, st := range left {
		if st.cancel != nil {
			st.cancel()
		}
		st.done = true
		st.body = nil
		r.observed(st, codes.Unavailable)
	}
	r.checkIdleLocked()
	r.mu.Unlock()
}

// Drain asks the client to open no more streams here (GOAWAY) and returns
// a channel closed when the streams in flight are done, or the relay is
// closed. It does not wait for the GOAWAY to be written. A stream the
// client opens before it reads the GOAWAY never reaches the upstream's
// handler: the GOAWAY tells the client to retry that call elsewhere.
func (r *Relay) Drain() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idle == nil {
		r.idle = make(chan struct{})
		r.draining = true
		r.goneAway = r.lastID
		if !r.closed {
			last := r.goneAway
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				_ = r.clientW.frames(true, func(f *http2.Framer) error { return f.WriteGoAway(last, http2.ErrCodeNo, nil) })
			}()
		}
	}
	r.checkIdleLocked()
	return r.idle
}

// Idle reports whether no call is in flight on the relay, and since when:
// the end of its last call, or New when it has had none. A closed relay is
// not idle.
func (r *Relay) Idle() (since time.Time, idle bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active, len(r.streams) == 0 && !r.closed && !r.evicting.Load()
}

// Evict closes the relay if no call is in flight, and reports whether it
// did. From the moment it finds the relay idle nothing more the client
// sends goes upstream, so a call the client opens meanwhile is never
// processed; the client is sent GOAWAY (NO_ERROR, with the last stream it
// opened, so that gRPC retries such a call on a new connection), waiting
// at most wait for the write, and both connections are closed.
func (r *Relay) Evict(wait time.Duration, reason string) bool {
	r.mu.Lock()
	if len(r.streams) > 0 || r.closed || r.evicting.Load() {
		r.mu.Unlock()
		return false
	}
	r.evicting.Store(true)
	last := r.lastID
	r.mu.Unlock()
	r.clientW.stop(wait)
	_ = r.clientW.frames(true, func(f *http2.Framer) error { return f.WriteGoAway(last, http2.ErrCodeNo, []byte(reason)) })
	r.Close()
	return true
}

// observed reports the call once; mu is held, or st is out of the map.
func (r *Relay) observed(st *stream, code codes.Code) {
	if st.seen {
		return
	}
	st.seen = true
	if r.observe != nil {
		r.observe(st.method, code, time.Since(st.start))
	}
}

// ending observes a call whose last frame the upstream sent, before that
// frame is forwarded: a client holding its answer finds the call counted.
func (r *Relay) ending(id uint32, code codes.Code) {
	r.mu.Lock()
	if st := r.streams[id]; st != nil {
		r.observed(st, code)
	}
	r.mu.Unlock()
}

func (r *Relay) checkIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkIdleLocked()
}

// checkIdleLocked closes idle when draining and nothing is left (r.mu held).
func (r *Relay) checkIdleLocked() {
	if r.draining && (len(r.streams) == 0 || r.closed) {
		select {
		case <-r.idle:
		default:
			close(r.idle)
		}
	}
}

// fromClient relays the client's frames upstream.
func (r *Relay) fromClient() error {
	br := bufio.NewReaderSize(r.client, readBuffer)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil {
		return err
	}
	if string(preface) != http2.ClientPreface {
		return errors.New("not an HTTP/2 client preface")
	}
	if err := r.upstreamW.write(br.Buffered() == 0, preface); err != nil {
		return err
	}
	fr := &frameReader{r: br, limit: &r.reqFrame}
	dec := newHeaderDecoder(&r.reqTable, r.lim.MaxHeaderListSize)
	control := newBucket(r.lim.MaxControlFrames)
	for {
		f, err := fr.next()
		if err != nil {
			return err
		}
		switch f.typ {
		case http2.FrameHeaders:
			if err := flushBeforeBlock(f, r.upstreamW); err != nil {
				return err
			}
			raw, block, err := fr.headerBlock(f, r.lim.MaxHeaderListSize, r.lim.MaxContinuations)
			if err != nil {
				return err
			}
			fields, err := dec.decode(block)
			if err != nil {
				return fmt.Errorf("request headers on stream %d: %w", f.id, err)
			}
			st, release, how := r.requestHeaders(f, fields)
			if r.evicting.Load() {
				continue // Evict found no call in flight: none goes upstream now
			}
			if release != nil {
				// Trailers from the client: gRPC clients send none. The
				// held request goes first, unchanged, so nothing
				// overtakes it.
				err := r.sendData(f.id, st, release, false)
				r.release(st)
				if err != nil {
					return err
				}
			}
			if err := r.upstreamW.write(!fr.ready() && how == accepted, raw); err != nil {
				return err
			}
			// The upstream has a refused stream's HEADERS (its HPACK
			// table follows them): reset the stream there, before its
			// DATA, which the upstream then drops.
			switch how {
			case overHeld:
				err := r.refuse(f.id, true, status.Newf(codes.ResourceExhausted, "%s: too many requests held at once (at most %d on a connection, or the shared slots are taken)", st.method, r.lim.MaxHeld))
				if err != nil {
					return err
				}
			case afterGoAway:
				if err := r.upstreamW.frames(true, func(w *http2.Framer) error { return w.WriteRSTStream(f.id, http2.ErrCodeCancel) }); err != nil {
					return err
				}
			}
			continue
		case http2.FrameData:
			if held, err := r.hold(f); err != nil || held {
				if err == nil && !fr.ready() {
					err = r.upstreamW.write(true)
				}
				if err != nil {
					return err
				}
				continue
			}
		case http2.FrameRSTStream:
			if !control.take(time.Now()) {
				return clientError(http2.ErrCodeEnhanceYourCalm, fmt.Errorf("over %d control frames (RST_STREAM)", r.lim.MaxControlFrames))
			}
			r.finish(f.id, codes.Canceled)
		case http2.FramePing, http2.FrameSettings:
			if !r.paid(f) && !control.take(time.Now()) {
				return clientError(http2.ErrCodeEnhanceYourCalm, fmt.Errorf("over %d control frames (%v)", r.lim.MaxControlFrames, f.typ))
			}
			if f.typ == http2.FrameSettings && !f.flags.Has(http2.FlagSettingsAck) {
				settings(f, func(s http2.Setting) {
					switch s.ID {
					case http2.SettingHeaderTableSize:
						r.respTable.Store(max(s.Val, r.respTable.Load()))
					case http2.SettingMaxFrameSize:
						r.respFrame.Store(max(min(s.Val, uint32(r.lim.MaxFrameSize)), r.respFrame.Load()))
					}
				})
			}
		}
		if r.evicting.Load() {
			continue
		}
		if err := r.upstreamW.write(!fr.ready(), f.raw); err != nil {
			return err
		}
	}
}

// paid reports whether a PING or SETTINGS frame from the client is
// accounted for by the upstream's traffic: an acknowledgement of the
// upstream's own frame, or the first since a HEADERS or DATA frame went
// to the client (grpc-go's server counts pings so: a BDP ping follows
// data).
func (r *Relay) paid(f frame) bool {
	out := &r.pings
	if f.typ == http2.FrameSettings {
		out = &r.settings
	}
	if f.flags.Has(http2.FlagPingAck) { // = FlagSettingsAck
		for {
			n := out.Load()
			if n <= 0 {
				return false
			}
			if out.CompareAndSwap(n, n-1) {
				return true
			}
		}
	}
	return r.fed.Swap(false)
}

// refusal is what requestHeaders decides about a stream.
type refusal int

const (
	accepted refusal = iota
	// overHeld: its request should be held, but MaxHeld requests are
	// held already. The client gets ResourceExhausted.
	overHeld
	// afterGoAway: opened after Drain's GOAWAY, so it is never processed.
	// The client gets nothing: the GOAWAY tells it to retry the call on a
	// new connection (RFC 9113 6.8), as gRPC does.
	afterGoAway
)

// requestHeaders notes a new stream: its method, whether its request is
// held for rewriting, and whether it is refused. For trailers on a held
// stream whose request has not been sent, it returns the request to send
// on first (release).
func (r *Relay) requestHeaders(f frame, fields []hpack.HeaderField) (st *stream, release []byte, how refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.streams[f.id]; st != nil {
		if st.held && !st.sent {
			st.sent = true
			return st, st.body, accepted
		}
		return st, nil, accepted
	}
	if f.id <= r.lastID || f.id%2 == 0 || r.closed || r.evicting.Load() {
		return nil, nil, accepted // not a new client stream (the upstream will say so), or evicted: never sent on
	}
	r.lastID = f.id
	if r.draining && f.id > r.goneAway {
		return nil, nil, afterGoAway
	}
	r.active = time.Now()
	st = &stream{start: r.active}
	var timeout string
	for _, hf := range fields {
		switch hf.Name {
		case ":path":
			st.method = hf.Value
		case "grpc-timeout":
			timeout = hf.Value
		}
	}
	r.streams[f.id] = st
	if r.rw == nil || st.method != r.method || f.flags.Has(http2.FlagHeadersEndStream) {
		return st, nil, accepted
	}
	if r.held >= r.lim.MaxHeld || !r.slots.acquire() {
		return st, nil, overHeld
	}
	r.held++
	st.held, st.counted = true, true
	st.window = r.upInit
	if d, ok := grpcTimeout(timeout); ok {
		st.ctx, st.cancel = context.WithTimeout(r.ctx, d)
	} else {
		st.ctx, st.cancel = context.WithCancel(r.ctx)
	}
	return st, nil, accepted
}

// release lets go of a held stream's request: it no longer counts towards
// MaxHeld.
func (r *Relay) release(st *stream) {
	r.mu.Lock()
	r.releaseLocked(st)
	r.mu.Unlock()
}

func (r *Relay) releaseLocked(st *stream) {
	if st.counted {
		st.counted = false
		st.body = nil
		r.held--
		r.slots.release()
	}
}

// refuse ends stream id, whose HEADERS the upstream has, with a
// trailers-only reply of sts to the client (and RST_STREAM NO_ERROR,
// when the client is still sending: it need not send the rest) and
// RST_STREAM CANCEL to the upstream. Whatever the client still sends on
// the stream is relayed as any stream's: the upstream ignores frames on
// a stream it was told is reset, and gives their connection-level
// credit back.
func (r *Relay) refuse(id uint32, open bool, sts *status.Status) error {
	r.finish(id, sts.Code())
	if err := r.upstreamW.frames(true, func(f *http2.Framer) error { return f.WriteRSTStream(id, http2.ErrCodeCancel) }); err != nil {
		return err
	}
	block := trailersOnly(uint32(sts.Code()), sts.Message())
	return r.clientW.frames(true, func(f *http2.Framer) error {
		err := f.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
		if err != nil || !open {
			return err
		}
		return f.WriteRSTStream(id, http2.ErrCodeNo)
	})
}

// hold keeps a held stream's request DATA and reports whether it did. The
// client gets its flow-control credit back at once, so that a request
// larger than a window cannot stall; when the request is complete it is
// rewritten and sent on by a goroutine of its own. A request over
// MaxHeldRequest, announced (gRPC's length prefix) or sent, is refused:
// the frame that crosses the limit is dropped (the client gets its
// connection-level credit back, not the stream's) and the stream reset.
func (r *Relay) hold(f frame) (bool, error) {
	r.mu.Lock()
	st := r.streams[f.id]
	if st == nil || !st.held || st.sent {
		r.mu.Unlock()
		return false, nil
	}
	p, err := dataPayload(f)
	if err != nil {
		r.mu.Unlock()
		return true, err
	}
	end := f.flags.Has(http2.FlagDataEndStream)
	limit := r.lim.MaxHeldRequest
	over := len(st.body)+len(p) > limit+5
	if !over {
		st.body = growBody(st.body, len(p), limit+5)
		st.body = append(st.body, p...)
		over = len(st.body) >= 5 && int64(binary.BigEndian.Uint32(st.body[1:5])) > int64(limit)
	}
	if over {
		st.sent = true
		r.releaseLocked(st)
		r.mu.Unlock()
		if n := uint32(len(f.payload())); n > 0 {
			if err := r.clientW.frames(false, func(fw *http2.Framer) error { return fw.WriteWindowUpdate(0, n) }); err != nil {
				return true, err
			}
		}
		return true, r.refuse(f.id, !end, status.Newf(codes.ResourceExhausted, "%s: request over %d bytes", st.method, limit))
	}
	if end {
		st.sent = true
		if r.closed {
			end = false // Close has ended the call
		} else {
			r.wg.Add(1)
		}
	}
	r.mu.Unlock()

	if n := uint32(len(f.payload())); n > 0 {
		err := r.clientW.frames(true, func(fw *http2.Framer) error {
			if err := fw.WriteWindowUpdate(0, n); err != nil || end {
				return err
			}
			return fw.WriteWindowUpdate(f.id, n)
		})
		if err != nil {
			if end {
				// The rewrite that releases the request will not run,
				// and a stream the upstream ended is gone from Close's
				// view: release it here.
				r.release(st)
				r.wg.Done()
			}
			return true, err
		}
	}
	if end {
		go func() {
			defer r.wg.Done()
			r.rewrite(f.id, st)
		}()
	}
	return true, nil
}

// growBody makes room for n more bytes in a held body of at most limit
// bytes: to the size its gRPC prefix announces when that is known and
// within limit, else by doubling, at most to limit.
func growBody(body []byte, n, limit int) []byte {
	need := len(body) + n
	if need <= cap(body) {
		return body
	}
	c := max(need, min(2*cap(body), limit))
	if len(body) >= 5 {
		if want := 5 + int64(binary.BigEndian.Uint32(body[1:5])); want >= int64(need) && want <= int64(limit) {
			c = int(want)
		}
	}
	return slices.Grow(body, c-len(body))
}

// rewrite hands a held request to the Rewriter and sends on what it
// returns, or answers the client with the error it rejects the call with.
func (r *Relay) rewrite(id uint32, st *stream) {
	defer r.release(st)
	r.mu.Lock()
	body, gone := st.body, st.done || r.closed
	r.mu.Unlock()
	if gone {
		return
	}
	out := body
	var failErr error
	if msg, err := grpcMessage(body); err != nil {
		failErr = r.rw.Malformed(err)
	} else {
		var m []byte
		if m, failErr = r.rw.Rewrite(st.ctx, msg); failErr == nil && !bytes.Equal(m, msg) {
			out = appendGRPCMessage(make([]byte, 0, 5+len(m)), m)
		}
	}

	r.mu.Lock()
	gone = st.done || r.closed
	r.mu.Unlock()
	if gone {
		return
	}
	if failErr != nil {
		if err := r.refuse(id, false, status.Convert(failErr)); err != nil {
			r.log.Debug("relay: reject held request", "method", st.method, "err", err)
		}
		return
	}
	if err := r.sendData(id, st, out, true); err != nil {
		r.log.Debug("relay: send held request", "method", st.method, "err", err)
		r.upstream.Close()
	}
}

// sendData writes msg on stream id as DATA frames within the upstream's
// stream window, waiting for window updates. The bytes count as the
// relay's: they are withheld from the upstream's next connection grants,
// since the client got its credit back when they were held. No lock is
// held while writing.
func (r *Relay) sendData(id uint32, st *stream, msg []byte, end bool) error {
	for off := 0; ; {
		r.mu.Lock()
		for st.window <= 0 && len(msg) > off && !st.done && !r.closed {
			r.cond.Wait()
		}
		if st.done || r.closed {
			r.mu.Unlock()
			return nil
		}
		n := min(len(msg)-off, sendFrameLen, int(max(st.window, 0)))
		st.window -= int64(n)
		r.owed += int64(n)
		r.mu.Unlock()
		last := off+n == len(msg)
		err := r.upstreamW.frames(true, func(f *http2.Framer) error { return f.WriteData(id, last && end, msg[off:off+n]) })
		if err != nil {
			return err
		}
		off += n
		if last {
			return nil
		}
	}
}

// fromUpstream relays the upstream's frames to the client.
func (r *Relay) fromUpstream() error {
	br := bufio.NewReaderSize(r.upstream, readBuffer)
	fr := &frameReader{r: br, limit: &r.respFrame}
	dec := newHeaderDecoder(&r.respTable, r.lim.MaxHeaderListSize)
	for {
		f, err := fr.next()
		if err != nil {
			return err
		}
		raw := f.raw
		switch f.typ {
		case http2.FrameHeaders:
			var block []byte
			if err := flushBeforeBlock(f, r.clientW); err != nil {
				return err
			}
			if raw, block, err = fr.headerBlock(f, r.lim.MaxHeaderListSize, r.lim.MaxContinuations); err != nil {
				return err
			}
			fields, err := dec.decode(block)
			if err != nil {
				return fmt.Errorf("response headers on stream %d: %w", f.id, err)
			}
			r.fed.Store(true)
			if f.flags.Has(http2.FlagHeadersEndStream) {
				code := codes.Unknown
				for _, hf := range fields {
					if hf.Name == "grpc-status" {
						if n, err := strconv.ParseUint(hf.Value, 10, 32); err == nil {
							code = codes.Code(n)
						}
					}
				}
				// Observed before the trailers go out; written before the
				// stream is forgotten, so that a drain does not close the
				// connection under them.
				r.ending(f.id, code)
				if err := r.clientW.write(!fr.ready(), raw); err != nil {
					return err
				}
				r.finish(f.id, code)
				continue
			}
		case http2.FrameData:
			r.fed.Store(true)
			if f.flags.Has(http2.FlagDataEndStream) {
				r.ending(f.id, codes.Unknown)
				if err := r.clientW.write(!fr.ready(), raw); err != nil {
					return err
				}
				r.finish(f.id, codes.Unknown)
				continue
			}
		case http2.FrameRSTStream:
			r.finish(f.id, codes.Canceled)
		case http2.FrameWindowUpdate:
			if inc, ok := windowIncrement(f); ok {
				if fwd := r.grant(f.id, inc); fwd != inc {
					if fwd == 0 {
						if !fr.ready() {
							err = r.clientW.write(true)
						}
						if err != nil {
							return err
						}
						continue
					}
					if err := r.clientW.frames(!fr.ready(), func(w *http2.Framer) error { return w.WriteWindowUpdate(0, uint32(fwd)) }); err != nil {
						return err
					}
					continue
				}
			}
		case http2.FramePing:
			if !f.flags.Has(http2.FlagPingAck) {
				r.pings.Add(1)
			}
		case http2.FrameSettings:
			if !f.flags.Has(http2.FlagSettingsAck) {
				r.settings.Add(1)
				settings(f, func(s http2.Setting) {
					switch s.ID {
					case http2.SettingHeaderTableSize:
						r.reqTable.Store(max(s.Val, r.reqTable.Load()))
					case http2.SettingInitialWindowSize:
						r.initialWindow(int64(s.Val))
					case http2.SettingMaxFrameSize:
						r.reqFrame.Store(max(min(s.Val, uint32(r.lim.MaxFrameSize)), r.reqFrame.Load()))
					}
				})
			}
		}
		if err := r.clientW.write(!fr.ready(), raw); err != nil {
			return err
		}
	}
}

// flushBeforeBlock flushes w when HEADERS frame f starts a block that
// CONTINUATION frames complete: reading them may wait for the peer, and
// the frames relayed before must not wait with them.
func flushBeforeBlock(f frame, w *connWriter) error {
	if f.flags.Has(http2.FlagHeadersEndHeaders) {
		return nil
	}
	return w.write(true)
}

// grant applies an upstream WINDOW_UPDATE and returns the increment the
// client gets: on the connection, less what the relay owes; on a held
// stream, the relay takes note (and the client, which has sent
// everything, gets it too).
func (r *Relay) grant(id uint32, inc int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == 0 {
		take := min(inc, r.owed)
		r.owed -= take
		return inc - take
	}
	if st := r.streams[id]; st != nil && st.held {
		st.window += inc
		r.cond.Broadcast()
	}
	return inc
}

// initialWindow applies the upstream's SETTINGS_INITIAL_WINDOW_SIZE to
// the windows of held streams (RFC 9113 6.9.2).
func (r *Relay) initialWindow(v int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delta := v - r.upInit
	r.upInit = v
	for _, st := range r.streams {
		if st.held {
			st.window += delta
		}
	}
	r.cond.Broadcast()
}

// finish ends a stream's bookkeeping and observes the call. A stream is
// done when the upstream ends it, or when either side resets it.
func (r *Relay) finish(id uint32, code codes.Code) {
	r.mu.Lock()
	r.finishLocked(id, code)
	r.mu.Unlock()
}

func (r *Relay) finishLocked(id uint32, code codes.Code) {
	st := r.streams[id]
	if st == nil {
		return
	}
	delete(r.streams, id)
	r.active = time.Now()
	st.done = true
	if st.cancel != nil {
		st.cancel()
	}
	if st.counted && !st.sent {
		r.releaseLocked(st) // a rewrite under way releases its own
	}
	r.cond.Broadcast()
	r.observed(st, code)
	r.checkIdleLocked()
}

// headerDecoder is one direction's HPACK decoder. The table size it may be
// told to use is set by the other direction's SETTINGS (allowed). A
// header list over limit (RFC 9113 6.5.2 accounting) is an error.
type headerDecoder struct {
	dec     *hpack.Decoder
	allowed *atomic.Uint32
	table   uint32
	limit   int
	size    int
	fields  []hpack.HeaderField
}

func newHeaderDecoder(allowed *atomic.Uint32, limit int) *headerDecoder {
	d := &headerDecoder{allowed: allowed, table: defaultHeaderTable, limit: limit}
	d.dec = hpack.NewDecoder(defaultHeaderTable, d.emit)
	d.dec.SetMaxStringLength(limit)
	return d
}

func (d *headerDecoder) emit(f hpack.HeaderField) {
	d.size += int(f.Size())
	if d.size <= d.limit {
		d.fields = append(d.fields, f)
	}
}

// decode decodes a header block; the fields are valid until the next call.
func (d *headerDecoder) decode(block []byte) ([]hpack.HeaderField, error) {
	if t := d.allowed.Load(); t != d.table {
		d.table = t
		d.dec.SetAllowedMaxDynamicTableSize(t)
	}
	d.fields, d.size = d.fields[:0], 0
	if _, err := d.dec.Write(block); err != nil {
		return nil, clientError(http2.ErrCodeCompression, err)
	}
	if err := d.dec.Close(); err != nil {
		return nil, clientError(http2.ErrCodeCompression, err)
	}
	if d.size > d.limit {
		return nil, clientError(http2.ErrCodeEnhanceYourCalm, fmt.Errorf("header list of %d bytes over %d", d.size, d.limit))
	}
	return d.fields, nil
}
