package cri

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec used for typed messages
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message the proxy does not decode. The bytes are the
// buffers gRPC received, kept with a reference of their own and handed back
// to gRPC (which frees them) when the frame is sent on.
type frame struct {
	data mem.BufferSlice
}

// free drops the frame's reference when it is not sent on.
func (f *frame) free() {
	if f.data != nil {
		f.data.Free()
		f.data = nil
	}
}

// codec passes frames through byte for byte and encodes every other value
// (the typed RunPodSandbox messages) with the standard proto codec. It is
// named "proto" so that the content-type on both sides stays
// application/grpc+proto, as kubelet and containerd expect.
type codec struct {
	proto encoding.CodecV2
}

func newCodec() *codec {
	c := encoding.GetCodecV2("proto")
	if c == nil {
		panic("cri: grpc proto codec is not registered")
	}
	return &codec{proto: c}
}

func (c *codec) Name() string { return "proto" }

// Marshal returns a frame's buffers as they are: the reference taken by
// Unmarshal passes to gRPC, which frees it once written.
func (c *codec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		if f.data == nil {
			return mem.BufferSlice{}, nil
		}
		out := f.data
		f.data = nil
		return out, nil
	}
	out, err := c.proto.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cri: marshal %T: %w", v, err)
	}
	return out, nil
}

// Unmarshal keeps a reference to the received buffers in a frame instead of
// copying them.
func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		data.Ref()
		f.free()
		f.data = data
		return nil
	}
	return c.proto.Unmarshal(data, v)
}
