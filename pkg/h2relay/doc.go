// Package h2relay relays one HTTP/2 client connection to one upstream
// connection at the frame level, for gRPC.
//
// It rewrites the request of one method on the way. It knows gRPC's framing
// over HTTP/2 (the 5-byte message prefix, grpc-status, grpc-message,
// grpc-timeout) and nothing of the services it relays.
//
// # Pass-through
//
// Frames pass through as read, byte for byte, in both directions: every
// method and service, streams, unknown methods, and with them status codes,
// details, metadata, deadlines, SETTINGS, PING and GOAWAY. Frames that fit
// the read buffer (32 KiB) are relayed from it without a copy; a larger
// frame is read into a buffer that grows with what arrives, not with the
// length its header announces. What has been gathered is flushed whenever
// the next frame is not complete yet, or a header block goes on in
// CONTINUATION frames, so nothing waits behind a frame still arriving.
// Header blocks are HPACK-decoded on the side. That keeps the decoders in
// step with the peers' tables (table sizes follow each side's SETTINGS). It
// spots the rewritten method's streams and observes each call's method and
// status (ObserveFunc). Bad input (no client preface, an undecodable header
// block, bad padding, a frame inside a header block, a truncated frame)
// closes that connection.
//
// # The rewritten method
//
// WithRewrite names one full method. Its request DATA is held until the
// request is complete; the client gets its flow-control credit back at once
// (connection and stream), so a request larger than a window does not stall.
// The held body, when it is exactly one uncompressed gRPC message, goes to
// Rewriter.Rewrite with a context that ends with the call (grpc-timeout, a
// reset, the connection); otherwise Rewriter.Malformed decides. The result
// is sent upstream as new DATA frames (at most 16 KiB each) within the
// upstream's stream window. The bytes the relay sends are withheld from the
// upstream's next connection-level grants. So the client's view of the
// window never exceeds the upstream's. A message equal to the original is
// sent as the original bytes. A rejection (an error from the Rewriter) is
// answered with a trailers-only response. Its fields are HPACK-encoded
// Sensitive (literals never indexed, or the static table). So the client's
// dynamic table, which the upstream's encoder drives, is untouched. The
// upstream's stream is reset (CANCEL). Responses are never decoded.
//
// # Limits
//
// Limits (WithLimits; a zero field takes its DefaultLimits value) bound
// what a peer can make a relay hold or do:
//
//   - MaxFrameSize (1 MiB): a frame longer than its receiver announced
//     (SETTINGS_MAX_FRAME_SIZE, 16 KiB unless announced), or than
//     MaxFrameSize, closes the connection before it is read
//     (FRAME_SIZE_ERROR).
//   - MaxHeaderListSize (1 MiB, x/net/http2's server default): a header
//     block as sent (frames, headers and padding included, counted as they
//     arrive) and as decoded (RFC 9113 6.5.2 accounting).
//   - MaxContinuations (128): CONTINUATION frames in one header block.
//   - MaxControlFrames (1000): a token bucket of 1000 refilling at 1000 per
//     10 s, taken by each RST_STREAM frame from the client and by each PING
//     or SETTINGS frame that is neither an acknowledgement of the
//     upstream's own nor the first since a HEADERS or DATA frame went to
//     the client (as grpc-go's server counts pings: BDP pings follow
//     data).
//   - MaxHeldRequest (1 MiB): a held request announcing (gRPC's length
//     prefix) or sending more is answered ResourceExhausted (trailers only,
//     then RST_STREAM NO_ERROR) and reset upstream (CANCEL); the frame that
//     crosses the limit is dropped with only its connection-level credit
//     returned, and the rest of the stream is relayed as any stream's (the
//     upstream ignores frames on a stream it reset).
//   - MaxHeld (128): requests held at once on one relay (received,
//     rewritten or being sent on), and HeldSlots (WithHeldSlots) shared by
//     relays for a bound across connections; a call beyond either is
//     answered ResourceExhausted at once and reset upstream.
//   - WriteTimeout (30 s; negative: none): a peer that does not read for
//     that long loses the connection.
//
// A client that breaks one of the connection limits (or the protocol) is
// sent GOAWAY (ENHANCE_YOUR_CALM, FRAME_SIZE_ERROR, PROTOCOL_ERROR or
// COMPRESSION_ERROR, the reason as debug data), for at most a second,
// and both connections are closed. An upstream that does is closed on.
//
// Frames the relay writes itself (WINDOW_UPDATE, RST_STREAM, GOAWAY,
// DATA, HEADERS) go through golang.org/x/net/http2's Framer. Frames are
// not read with the Framer: it copies each frame and the relay must write
// on the bytes it read.
//
// # Lifetime
//
// Run relays until either side closes, Close is called or its context is
// done. Then both connections are closed, calls in flight are observed as
// Unavailable, and Run returns once its goroutines have. A Rewriter must
// return when its context is done.
//
// No lock is held while writing to a connection. Close closes both
// connections before anything else, so it returns at once and ends every
// write under way, whatever the peers do. Drain sends the client GOAWAY
// (no new streams) without waiting for the write. A stream the client
// opens before it reads the GOAWAY is reset upstream right after its
// HEADERS, so its call never runs, and the client retries it on a new
// connection, as the GOAWAY's last stream tells it to. Drain reports when
// the streams in flight are done; the caller bounds that wait and then
// calls Close. Idle reports whether a call is in flight and since when
// the relay has had none. Evict closes a relay with none (GOAWAY first). From the
// moment Evict finds it idle, nothing more the client sends goes upstream.
// So a call racing the eviction is never processed, and the GOAWAY's last
// stream lets the client retry it.
//
// A peer that stops reading ends the relay after WriteTimeout. One that
// hangs up ends it at once. While the relay is blocked writing to the
// other, it ends within 250 ms: a write blocked that long asks whether the
// other peer hung up (poll for POLLRDHUP: Linux, on plain sockets;
// elsewhere WriteTimeout ends it).
//
// The package imports golang.org/x/net/http2 and grpc's codes and status;
// it must not import a service's API (k8s.io/cri-api) or a logger other
// than log/slog.
package h2relay
