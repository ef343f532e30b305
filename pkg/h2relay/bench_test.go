package h2relay

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"golang.org/x/net/http2"
)

// BenchmarkFrameReader relays a 1 MiB response (DATA frames of 16 KiB,
// as gRPC servers write them) from a reader to a writer: with the
// relay's frame reader, which writes on the bytes it read, and with
// x/net's Framer, which copies each frame out of the stream and must
// write it anew. The difference is what reading with the Framer would
// cost the relay.
//
//	go test -run '^$' -bench FrameReader -benchmem ./pkg/h2relay/
func BenchmarkFrameReader(b *testing.B) {
	var in bytes.Buffer
	fw := http2.NewFramer(&in, nil)
	chunk := bytes.Repeat([]byte("x"), 16<<10)
	for range 64 {
		if err := fw.WriteData(1, false, chunk); err != nil {
			b.Fatal(err)
		}
	}
	stream := in.Bytes()
	// relay reads the stream from br each round and writes its frames to
	// w, which leads nowhere.
	relay := func(b *testing.B, round func(br *bufio.Reader, w *bufio.Writer)) {
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		r := bytes.NewReader(stream)
		br := bufio.NewReaderSize(r, readBuffer)
		w := bufio.NewWriterSize(io.Discard, 64<<10)
		for b.Loop() {
			r.Reset(stream)
			br.Reset(r)
			round(br, w)
		}
	}
	b.Run("zero-copy", func(b *testing.B) {
		relay(b, func(br *bufio.Reader, w *bufio.Writer) {
			fr := &frameReader{r: br}
			for {
				f, err := fr.next()
				if err != nil {
					break
				}
				_, _ = w.Write(f.raw)
			}
		})
	})
	b.Run("framer", func(b *testing.B) {
		var out *http2.Framer
		relay(b, func(br *bufio.Reader, w *bufio.Writer) {
			if out == nil {
				out = http2.NewFramer(w, nil)
			}
			in := http2.NewFramer(nil, br)
			in.SetMaxReadFrameSize(maxFrameLen)
			for {
				f, err := in.ReadFrame()
				if err != nil {
					break
				}
				d := f.(*http2.DataFrame)
				_ = out.WriteData(d.StreamID, d.StreamEnded(), d.Data())
			}
		})
	})
}
