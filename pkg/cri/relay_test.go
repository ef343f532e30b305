package cri

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRelayBadInput sends what no HTTP/2 client sends: the shim closes that
// connection, without a panic, and keeps serving everyone else.
func TestRelayBadInput(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, input string }{
		{"not a preface", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"HEADERS with a bad HPACK block", clientPreface + string(append(appendFrameHeader(nil, 3, frameHeaders, flagEndHeaders, 1), 0xff, 0xff, 0xff))},
		{"HEADERS with bad padding", clientPreface + string(append(appendFrameHeader(nil, 2, frameHeaders, flagEndHeaders|flagPadded, 1), 0x09, 0x00))},
		{"a frame interrupting a header block", clientPreface + string(appendFrameHeader(nil, 0, frameHeaders, 0, 1)) + string(appendFrameHeader(nil, 0, frameData, 0, 1))},
		{"a truncated frame", clientPreface + string(appendFrameHeader(nil, 100, frameData, 0, 1)) + "short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("unix", e.path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.input); err != nil {
				t.Fatal(err)
			}
			if tc.name == "a truncated frame" {
				c.(*net.UnixConn).CloseWrite()
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			// The connection must end (the runtime's SETTINGS may come first).
			if _, err := io.Copy(io.Discard, c); err != nil {
				t.Fatalf("connection not closed by the shim: %v", err)
			}
			if _, err := e.runtime.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
				t.Fatalf("shim stopped serving after %s: %v", tc.name, err)
			}
		})
	}
}
