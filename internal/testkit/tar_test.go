package testkit

import (
	"archive/tar"
	"bytes"
	"testing"
)

func TestReadTar(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct{ name, body string }{{"a", "one"}, {"b/c", ""}, {"d", "three"}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	tw.Close()
	stream := buf.Bytes()
	files := ReadTar(t, bytes.NewReader(stream))
	if len(files) != 3 || files[0].Name != "a" || string(files[0].Data) != "one" || files[1].Name != "b/c" || len(files[1].Data) != 0 || string(files[2].Data) != "three" {
		t.Errorf("read %+v", files)
	}
	// A stream cut inside an entry fails the test.
	ft := &fatalTB{TB: t}
	func() {
		defer func() { recover() }()
		ReadTar(ft, bytes.NewReader(stream[:2050]))
	}()
	if ft.msg == "" {
		t.Error("a truncated stream did not fail")
	}
}
