package testkit

import (
	"archive/tar"
	"errors"
	"io"
	"testing"
)

// TarFile is one entry of a tar stream, with its content.
type TarFile struct {
	*tar.Header
	Data []byte
}

// ReadTar reads every entry of the tar stream r, in order; a read error
// fails t.
func ReadTar(t testing.TB, r io.Reader) []TarFile {
	t.Helper()
	var files []TarFile
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("tar %s: %v", hdr.Name, err)
		}
		files = append(files, TarFile{hdr, b})
	}
}
