package cri

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// relay is one kubelet connection spliced to one runtime connection at the
// HTTP/2 frame level. Frames pass through as they are read, byte for byte,
// except the request DATA of RunPodSandbox streams, which is held until
// the request is complete, rewritten, and sent on as new DATA frames.
// Header blocks in both directions are HPACK-decoded (which keeps the
// decoders' tables in step with the peers'), to find RunPodSandbox streams
// and to count calls by method and status.
type relay struct {
	s        *Server
	down, up net.Conn // kubelet, runtime
	downW    *syncWriter
	upW      *syncWriter
	ctx      context.Context
	cancel   context.CancelFunc

	// HPACK table sizes each side's decoder may be told to use, set from
	// the other direction's SETTINGS.
	reqTable, respTable atomic.Uint32

	mu       sync.Mutex
	cond     *sync.Cond
	streams  map[uint32]*relayStream
	lastID   uint32 // highest stream kubelet opened
	closed   bool
	upInit   int64 // the runtime's SETTINGS_INITIAL_WINDOW_SIZE
	owed     int64 // connection-level bytes the shim sent on kubelet's behalf, withheld from the runtime's next grants
	draining bool
	idle     chan struct{} // closed when draining and no stream is left
}

// relayStream is one call on a relay.
type relayStream struct {
	method    string
	start     time.Time
	intercept bool // RunPodSandbox: request DATA is held
	held      []byte
	sent      bool  // the held request has been dealt with
	window    int64 // the runtime's stream window for the shim's own DATA
	ctx       context.Context
	cancel    context.CancelFunc
	done      bool
}

func (s *Server) newRelay(ctx context.Context, down, up net.Conn) *relay {
	r := &relay{s: s, down: down, up: up, downW: newSyncWriter(down), upW: newSyncWriter(up),
		streams: map[uint32]*relayStream{}, upInit: defaultWindow}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.cond = sync.NewCond(&r.mu)
	r.reqTable.Store(defaultHeaderTable)
	r.respTable.Store(defaultHeaderTable)
	return r
}

// run relays until either side closes, then closes both.
func (r *relay) run() {
	errc := make(chan error, 2)
	go func() { errc <- r.fromKubelet() }()
	go func() { errc <- r.fromRuntime() }()
	err := <-errc
	r.close()
	<-errc
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		r.s.log.Debug("relay connection closed", "err", err)
	}
}

func (r *relay) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	left := r.streams
	r.streams = map[uint32]*relayStream{}
	r.cond.Broadcast()
	r.mu.Unlock()
	r.cancel()
	r.down.Close()
	r.up.Close()
	for _, st := range left {
		if st.cancel != nil {
			st.cancel()
		}
		r.s.observe(st.method, codes.Unavailable, st.start)
	}
	r.checkIdle()
}

// drain asks kubelet to open no more streams here (GOAWAY) and returns a
// channel closed when the streams in flight are done.
func (r *relay) drain() <-chan struct{} {
	r.mu.Lock()
	if r.idle == nil {
		r.idle = make(chan struct{})
		r.draining = true
	}
	last, idle := r.lastID, r.idle
	r.mu.Unlock()
	_ = r.downW.write(true, goAway(last, errCodeNo))
	r.checkIdle()
	return idle
}

func (r *relay) checkIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkIdleLocked()
}

// checkIdleLocked closes idle when draining and nothing is left (r.mu held).
func (r *relay) checkIdleLocked() {
	if r.draining && (len(r.streams) == 0 || r.closed) {
		select {
		case <-r.idle:
		default:
			close(r.idle)
		}
	}
}

// fromKubelet relays kubelet's frames to the runtime.
func (r *relay) fromKubelet() error {
	br := bufio.NewReaderSize(r.down, readBuffer)
	preface := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(br, preface); err != nil {
		return err
	}
	if string(preface) != clientPreface {
		return errors.New("not an HTTP/2 client preface")
	}
	if err := r.upW.write(br.Buffered() == 0, preface); err != nil {
		return err
	}
	fr := &frameReader{r: br}
	dec := newHeaderDecoder(&r.reqTable)
	for {
		f, err := fr.next()
		if err != nil {
			return err
		}
		switch f.typ {
		case frameHeaders:
			raw, block, err := fr.headerBlock(f)
			if err != nil {
				return err
			}
			fields, err := dec.decode(block)
			if err != nil {
				return fmt.Errorf("request headers on stream %d: %w", f.id, err)
			}
			if err := r.requestHeaders(f, fields); err != nil {
				return err
			}
			if err := r.upW.write(!fr.ready(), raw); err != nil {
				return err
			}
			continue
		case frameData:
			if held, err := r.hold(f); err != nil || held {
				if err == nil && !fr.ready() {
					err = r.upW.write(true)
				}
				if err != nil {
					return err
				}
				continue
			}
		case frameRSTStream:
			r.finish(f.id, codes.Canceled)
		case frameSettings:
			if f.flags&flagAck == 0 {
				settings(f, func(id uint16, v uint32) {
					if id == settingHeaderTableSize {
						r.respTable.Store(max(v, r.respTable.Load()))
					}
				})
			}
		}
		if err := r.upW.write(!fr.ready(), f.raw); err != nil {
			return err
		}
	}
}

// requestHeaders notes a new stream: its method, and whether its request
// is held for rewriting.
func (r *relay) requestHeaders(f h2frame, fields []hpack.HeaderField) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.streams[f.id]; st != nil {
		// Trailers from the client: gRPC clients send none. Release a held
		// request first, unchanged, so nothing overtakes it.
		if st.intercept && !st.sent {
			st.sent = true
			return r.sendData(f.id, st, st.held, false)
		}
		return nil
	}
	if f.id <= r.lastID || f.id%2 == 0 {
		return nil // not a new client stream: the runtime will say so
	}
	r.lastID = f.id
	st := &relayStream{start: time.Now()}
	var timeout string
	for _, hf := range fields {
		switch hf.Name {
		case ":path":
			st.method = hf.Value
		case "grpc-timeout":
			timeout = hf.Value
		}
	}
	if st.method == runPodSandboxMethod && f.flags&flagEndStream == 0 {
		st.intercept = true
		st.window = r.upInit
		if d, ok := grpcTimeout(timeout); ok {
			st.ctx, st.cancel = context.WithTimeout(r.ctx, d)
		} else {
			st.ctx, st.cancel = context.WithCancel(r.ctx)
		}
	}
	r.streams[f.id] = st
	return nil
}

// hold keeps a RunPodSandbox request's DATA and reports whether it did.
// Kubelet gets its flow-control credit back at once, so that a request
// larger than a window cannot stall; when the request is complete it is
// rewritten and sent on by a goroutine of its own.
func (r *relay) hold(f h2frame) (bool, error) {
	r.mu.Lock()
	st := r.streams[f.id]
	if st == nil || !st.intercept || st.sent {
		r.mu.Unlock()
		return false, nil
	}
	p, err := dataPayload(f)
	if err != nil {
		r.mu.Unlock()
		return true, err
	}
	if len(st.held)+len(p) > MaxMsgSize+5 {
		r.mu.Unlock()
		return true, fmt.Errorf("RunPodSandbox request on stream %d over %d bytes", f.id, MaxMsgSize)
	}
	st.held = append(st.held, p...)
	end := f.flags&flagEndStream != 0
	if end {
		st.sent = true
	}
	r.mu.Unlock()

	if n := len(f.payload()); n > 0 {
		credit := windowUpdate(nil, 0, uint32(n))
		if !end {
			credit = windowUpdate(credit, f.id, uint32(n))
		}
		if err := r.downW.write(true, credit); err != nil {
			return true, err
		}
	}
	if end {
		go r.rewrite(f.id, st)
	}
	return true, nil
}

// rewrite decodes a held RunPodSandbox request, rewrites its DNS, and sends
// it on, or answers kubelet with the error the shim fails it with.
func (r *relay) rewrite(id uint32, st *relayStream) {
	msg, out := st.held, st.held
	var failErr error
	switch {
	case len(msg) < 5 || msg[0] != 0 || int(binary.BigEndian.Uint32(msg[1:5])) != len(msg)-5:
		_, failErr = r.s.failed(nil, sourceNone, "bad_request", &badRequestError{"request", "is compressed or is not exactly one gRPC message"})
	default:
		req := new(runtimeapi.RunPodSandboxRequest)
		if err := proto.Unmarshal(msg[5:], req); err != nil {
			_, failErr = r.s.failed(nil, sourceNone, "bad_request", &badRequestError{"request", "cannot be decoded: " + err.Error()})
			break
		}
		start := time.Now()
		fwd, changed, err := r.s.rewrite(st.ctx, req)
		if err == nil && changed {
			var b []byte
			if b, err = proto.Marshal(fwd); err == nil {
				out = binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b)))
				out = append(out, b...)
			} else {
				_, err = r.s.failed(nil, sourceNone, "compute", fmt.Errorf("encode RunPodSandboxRequest: %w", err))
			}
		}
		r.s.m.rewriteSeconds.Observe(time.Since(start).Seconds())
		failErr = err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if st.done || r.closed {
		return
	}
	if failErr != nil {
		sts := status.Convert(failErr)
		if err := r.downW.write(true, trailersOnly(id, uint32(sts.Code()), sts.Message())); err != nil {
			return
		}
		_ = r.upW.write(true, rstStream(id, errCodeCancel))
		r.finishLocked(id, sts.Code())
		return
	}
	if err := r.sendData(id, st, out, true); err != nil {
		r.s.log.Debug("relay: send rewritten RunPodSandbox", "err", err)
		r.up.Close()
	}
}

// sendData writes msg on stream id as DATA frames within the runtime's
// stream window (r.mu held; it waits for window updates). The bytes count
// as the shim's: they are withheld from the runtime's next connection
// grants, since kubelet got its credit back when they were held.
func (r *relay) sendData(id uint32, st *relayStream, msg []byte, end bool) error {
	off := 0
	for {
		for st.window <= 0 && len(msg) > off && !st.done && !r.closed {
			r.cond.Wait()
		}
		if st.done || r.closed {
			return nil
		}
		n := min(len(msg)-off, sendFrameLen, int(max(st.window, 0)))
		last := off+n == len(msg)
		var flags uint8
		if last && end {
			flags = flagEndStream
		}
		b := appendFrameHeader(make([]byte, 0, frameHeaderLen+n), n, frameData, flags, id)
		if err := r.upW.write(true, append(b, msg[off:off+n]...)); err != nil {
			return err
		}
		st.window -= int64(n)
		r.owed += int64(n)
		off += n
		if last {
			return nil
		}
	}
}

// fromRuntime relays the runtime's frames to kubelet.
func (r *relay) fromRuntime() error {
	br := bufio.NewReaderSize(r.up, readBuffer)
	fr := &frameReader{r: br}
	dec := newHeaderDecoder(&r.respTable)
	for {
		f, err := fr.next()
		if err != nil {
			return err
		}
		raw := f.raw
		switch f.typ {
		case frameHeaders:
			var block []byte
			if raw, block, err = fr.headerBlock(f); err != nil {
				return err
			}
			fields, err := dec.decode(block)
			if err != nil {
				return fmt.Errorf("response headers on stream %d: %w", f.id, err)
			}
			if f.flags&flagEndStream != 0 {
				code := codes.Unknown
				for _, hf := range fields {
					if hf.Name == "grpc-status" {
						if n, err := strconv.ParseUint(hf.Value, 10, 32); err == nil {
							code = codes.Code(n)
						}
					}
				}
				// Written before the stream is forgotten, so that a drain
				// does not close the connection under the trailers.
				if err := r.downW.write(!fr.ready(), raw); err != nil {
					return err
				}
				r.finish(f.id, code)
				continue
			}
		case frameData:
			if f.flags&flagEndStream != 0 {
				if err := r.downW.write(!fr.ready(), raw); err != nil {
					return err
				}
				r.finish(f.id, codes.Unknown)
				continue
			}
		case frameRSTStream:
			r.finish(f.id, codes.Canceled)
		case frameWindowUpdate:
			if len(f.payload()) == 4 {
				inc := int64(binary.BigEndian.Uint32(f.payload()) & 0x7fffffff)
				if fwd := r.grant(f.id, inc); fwd != inc {
					if fwd == 0 {
						if !fr.ready() {
							err = r.downW.write(true)
						}
						if err != nil {
							return err
						}
						continue
					}
					raw = windowUpdate(nil, 0, uint32(fwd))
				}
			}
		case frameSettings:
			if f.flags&flagAck == 0 {
				settings(f, func(id uint16, v uint32) {
					switch id {
					case settingHeaderTableSize:
						r.reqTable.Store(max(v, r.reqTable.Load()))
					case settingInitialWindowSize:
						r.initialWindow(int64(v))
					}
				})
			}
		}
		if err := r.downW.write(!fr.ready(), raw); err != nil {
			return err
		}
	}
}

// grant applies a runtime WINDOW_UPDATE and returns the increment kubelet
// gets: on the connection, less what the shim owes; on a held stream, the
// shim takes note (and kubelet, which has sent everything, gets it too).
func (r *relay) grant(id uint32, inc int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == 0 {
		take := min(inc, r.owed)
		r.owed -= take
		return inc - take
	}
	if st := r.streams[id]; st != nil && st.intercept {
		st.window += inc
		r.cond.Broadcast()
	}
	return inc
}

// initialWindow applies the runtime's SETTINGS_INITIAL_WINDOW_SIZE to the
// windows of held streams (RFC 9113 6.9.2).
func (r *relay) initialWindow(v int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delta := v - r.upInit
	r.upInit = v
	for _, st := range r.streams {
		if st.intercept {
			st.window += delta
		}
	}
	r.cond.Broadcast()
}

// finish ends a stream's bookkeeping and counts the call. A stream is
// done when the runtime ends it, or when either side resets it.
func (r *relay) finish(id uint32, code codes.Code) {
	r.mu.Lock()
	r.finishLocked(id, code)
	r.mu.Unlock()
}

func (r *relay) finishLocked(id uint32, code codes.Code) {
	st := r.streams[id]
	if st == nil {
		return
	}
	delete(r.streams, id)
	st.done = true
	if st.cancel != nil {
		st.cancel()
	}
	r.cond.Broadcast()
	r.s.observe(st.method, code, st.start)
	r.checkIdleLocked()
}

// serveUnavailable answers kubelet while the runtime cannot be reached:
// a minimal HTTP/2 server that fails every call at once with Unavailable
// (not a hang), until the runtime answers again; then it sends GOAWAY so
// that kubelet reconnects and is relayed.
func (s *Server) serveUnavailable(ctx context.Context, down net.Conn, dialErr error) {
	defer down.Close()
	w := newSyncWriter(down)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lastID atomic.Uint32
	go func() {
		defer down.Close()
		delay := 50 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			if c, err := net.DialTimeout("unix", s.runtimePath, time.Second); err == nil {
				c.Close()
				_ = w.write(true, goAway(lastID.Load(), errCodeNo))
				// Let kubelet read the GOAWAY before the connection ends.
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				return
			}
			delay = min(delay*2, s.maxBackoff)
		}
	}()

	br := bufio.NewReaderSize(down, 16<<10)
	preface := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != clientPreface {
		return
	}
	if err := w.write(true, appendFrameHeader(nil, 0, frameSettings, 0, 0)); err != nil {
		return
	}
	msg := fmt.Sprintf("dnsconfigurer: the container runtime at %q is not reachable: %v", s.endpoint, dialErr)
	fr := &frameReader{r: br}
	dec := newHeaderDecoder(nil)
	for {
		f, err := fr.next()
		if err != nil {
			return
		}
		var out []byte
		switch f.typ {
		case frameHeaders:
			_, block, err := fr.headerBlock(f)
			if err != nil {
				return
			}
			fields, err := dec.decode(block)
			if err != nil {
				return
			}
			method := ""
			for _, hf := range fields {
				if hf.Name == ":path" {
					method = hf.Value
				}
			}
			if f.id > lastID.Load() {
				lastID.Store(f.id)
			}
			s.observe(method, codes.Unavailable, time.Now())
			out = trailersOnly(f.id, uint32(codes.Unavailable), msg)
		case frameSettings:
			if f.flags&flagAck == 0 {
				out = appendFrameHeader(nil, 0, frameSettings, flagAck, 0)
			}
		case framePing:
			if f.flags&flagAck == 0 && len(f.payload()) == 8 {
				out = append(appendFrameHeader(nil, 8, framePing, flagAck, 0), f.payload()...)
			}
		case frameData:
			if n := len(f.payload()); n > 0 {
				out = windowUpdate(nil, 0, uint32(n))
			}
		}
		if out != nil {
			if err := w.write(!fr.ready(), out); err != nil {
				return
			}
		}
	}
}
