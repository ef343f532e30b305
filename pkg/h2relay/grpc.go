package h2relay

import (
	"encoding/binary"
	"errors"
	"strconv"
	"time"
)

// errNotOneMessage is a held request body that is not exactly one
// uncompressed gRPC length-prefixed message.
var errNotOneMessage = errors.New("is compressed or is not exactly one gRPC message")

// grpcMessage returns the message in a request body of one uncompressed
// gRPC length-prefixed message (gRPC over HTTP/2: a compressed flag byte,
// a 4-byte length, the message).
func grpcMessage(body []byte) ([]byte, error) {
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return nil, errNotOneMessage
	}
	return body[5:], nil
}

// appendGRPCMessage appends msg as one uncompressed gRPC message.
func appendGRPCMessage(b, msg []byte) []byte {
	b = binary.BigEndian.AppendUint32(append(b, 0), uint32(len(msg)))
	return append(b, msg...)
}

// grpcTimeoutUnits are the units of a grpc-timeout header.
var grpcTimeoutUnits = map[byte]time.Duration{
	'H': time.Hour, 'M': time.Minute, 'S': time.Second,
	'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond,
}

// grpcTimeout parses a grpc-timeout header ("100m", "5S").
func grpcTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	unit, ok := grpcTimeoutUnits[v[len(v)-1]]
	if !ok {
		return 0, false
	}
	return time.Duration(n) * unit, true
}
