// Package h2relay relays one HTTP/2 client connection to one upstream
// connection at the frame level, for gRPC, and rewrites the request of one
// method on the way. It knows gRPC's framing over HTTP/2 (the 5-byte
// message prefix, grpc-status, grpc-message, grpc-timeout) and nothing of
// the services it relays.
//
// # Pass-through
//
// Frames pass through as read, byte for byte, in both directions: every
// method and service, streams, unknown methods, and with them status
// codes, details, metadata, deadlines, SETTINGS, PING and GOAWAY. Frames
// that fit the read buffer (32 KiB) are relayed from it without a copy;
// a larger frame is read into a buffer that grows with what arrives, not
// with the length its header announces. What has been gathered is flushed
// whenever the next frame is not complete yet, so nothing waits behind a
// frame still arriving. Header blocks are HPACK-decoded on the side, which
// keeps the decoders in step with the peers' tables (table sizes follow
// each side's SETTINGS), to spot the rewritten method's streams and to
// observe each call's method and status (ObserveFunc). Bad input (no
// client preface, an undecodable header block, bad padding, a frame
// inside a header block, a truncated frame) closes that connection.
//
// # The rewritten method
//
// WithRewrite names one full method. Its request DATA is held until the
// request is complete; the client gets its flow-control credit back at
// once (connection and stream), so a request larger than a window does
// not stall. A request over WithMaxMsgSize closes the connection. The
// held body, when it is exactly one uncompressed gRPC message, goes to
// Rewriter.Rewrite with a context that ends with the call (grpc-timeout,
// a reset, the connection); otherwise Rewriter.Malformed decides. The
// result is sent upstream as new DATA frames (at most 16 KiB each) within
// the upstream's stream window; the bytes the relay sends are withheld
// from the upstream's next connection-level grants, so the client's view
// of the window never exceeds the upstream's. A message equal to the
// original is sent as the original bytes. A rejection (an error from the
// Rewriter) is answered with a trailers-only response whose fields are
// HPACK-encoded Sensitive (literals never indexed, or the static table),
// so the client's dynamic table, which the upstream's encoder drives, is
// untouched; the upstream's stream is reset (CANCEL). Responses are never
// decoded.
//
// Frames the relay writes itself (WINDOW_UPDATE, RST_STREAM, GOAWAY,
// DATA, HEADERS) go through golang.org/x/net/http2's Framer. Frames are
// not read with the Framer: it copies each frame and the relay must write
// on the bytes it read.
//
// # Lifetime
//
// Run relays until either side closes, Close is called or its context is
// done; then both connections are closed and calls in flight are observed
// as Unavailable. Drain sends the client GOAWAY (no new streams) and
// reports when the streams in flight are done.
//
// The package imports golang.org/x/net/http2 and grpc's codes and status;
// it must not import a service's API (k8s.io/cri-api) or a logger other
// than log/slog.
package h2relay
