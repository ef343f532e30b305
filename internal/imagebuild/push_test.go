package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testArchive writes the archive of the stand-in binaries (as TestArchive)
// to a file and returns it with what write reported.
func testArchive(t *testing.T) (string, Result) {
	t.Helper()
	bins, err := testBinaries()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res, err := testOptions(t, "linux/amd64", "linux/arm64").write(&buf, bins, []byte("stand-in CA bundle\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dc.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, res
}

// writeTar writes a tar of files (name → content) to a temporary file.
func writeTar(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "other.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// denyWrites answers every write as a registry that refuses the client.
func denyWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}`)
	})
}

// TestPush pushes the archive to in-memory registries (go-containerregistry's)
// over TLS and plain HTTP, reads the index back, and checks that each
// failure names what failed.
func TestPush(t *testing.T) {
	archive, built := testArchive(t)
	quiet := registry.Logger(log.New(io.Discard, "", 0))
	tlsReg := httptest.NewTLSServer(registry.New(quiet))
	defer tlsReg.Close()
	plainReg := httptest.NewServer(registry.New(quiet))
	defer plainReg.Close()
	denying := httptest.NewTLSServer(denyWrites(registry.New(quiet)))
	defer denying.Close()
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "https://") }
	caFile := func(s *httptest.Server) string {
		p := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noIndex := writeTar(t, map[string]string{"oci-layout": `{"imageLayoutVersion":"1.0.0"}`, "index.json": `{"schemaVersion":2,"manifests":[]}`})
	dockerSave := writeTar(t, map[string]string{"manifest.json": `[]`})
	anon := authn.NewMultiKeychain()

	for _, tc := range []struct {
		name, archive, ref string
		opts               PushOptions
		wantErr            []string // substrings; none for success
	}{
		{name: "TLS with the CA", archive: archive, ref: host(tlsReg) + "/dnsconfigurer:v1", opts: PushOptions{CAFile: caFile(tlsReg)}},
		{name: "plain HTTP", archive: archive, ref: strings.TrimPrefix(plainReg.URL, "http://") + "/team/dnsconfigurer:v1", opts: PushOptions{PlainHTTP: true}},
		{name: "TLS without the CA", archive: archive, ref: host(tlsReg) + "/dnsconfigurer:v1",
			wantErr: []string{"push " + archive + " to " + host(tlsReg) + "/dnsconfigurer:v1", "certificate"}},
		{name: "CA file missing", archive: archive, ref: host(tlsReg) + "/dnsconfigurer:v1", opts: PushOptions{CAFile: "/nonexistent/ca.pem"},
			wantErr: []string{"registry ca", "/nonexistent/ca.pem"}},
		{name: "CA file without a certificate", archive: archive, ref: host(tlsReg) + "/dnsconfigurer:v1", opts: PushOptions{CAFile: notPEM},
			wantErr: []string{"registry ca " + notPEM, "no PEM certificate"}},
		{name: "registry refuses", archive: archive, ref: host(denying) + "/dnsconfigurer:v1", opts: PushOptions{CAFile: caFile(denying)},
			wantErr: []string{"push " + archive + " to " + host(denying), "DENIED"}},
		{name: "archive missing", archive: "/nonexistent/dc.tar", ref: host(tlsReg) + "/dnsconfigurer:v1",
			wantErr: []string{"image archive", "/nonexistent/dc.tar"}},
		{name: "archive without an image index", archive: noIndex, ref: host(tlsReg) + "/dnsconfigurer:v1",
			wantErr: []string{"image archive " + noIndex, "no image index"}},
		{name: "docker-save archive without a layout", archive: dockerSave, ref: host(tlsReg) + "/dnsconfigurer:v1",
			wantErr: []string{"image archive " + dockerSave, "not an OCI image layout"}},
		{name: "reference without a repository", archive: archive, ref: "Bad Ref",
			wantErr: []string{`image reference "Bad Ref"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Keychain = anon
			res, err := Push(context.Background(), tc.archive, tc.ref, tc.opts)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Push succeeded: %+v; want an error with %q", res, tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkPushed(t, tc.ref, tc.opts, res, built)
		})
	}
}

// checkPushed reads the index back from the registry and compares it with
// the archive's: the index digest, each platform's manifest digest, and
// what Push reported.
func checkPushed(t *testing.T, ref string, opts PushOptions, res PushResult, built Result) {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != built.Digest || res.Ref != tag.Context().Name()+"@"+built.Digest {
		t.Errorf("Push reported %s as %s, want the archive's index %s", res.Digest, res.Ref, built.Digest)
	}
	tr, err := opts.transport()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag, remote.WithTransport(tr))
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil || d.String() != built.Digest {
		t.Errorf("the registry serves %s at %s (%v), want %s", ref, d, err, built.Digest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(built.Images) || len(res.Images) != len(built.Images) {
		t.Fatalf("the registry's index has %d manifests, Push reported %d, the archive %d", len(im.Manifests), len(res.Images), len(built.Images))
	}
	for i, want := range built.Images {
		got := im.Manifests[i]
		if got.Platform.String() != want.Platform || got.Digest.String() != want.Digest {
			t.Errorf("manifest %d: %s %s, want %s %s", i, got.Platform, got.Digest, want.Platform, want.Digest)
		}
		if res.Images[i] != (PushedImage{Platform: want.Platform, Digest: want.Digest}) {
			t.Errorf("Push reported %+v, want %s %s", res.Images[i], want.Platform, want.Digest)
		}
		img, err := idx.Image(got.Digest)
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, %v", want.Platform, len(layers), err)
		}
		// Reading the layer proves the registry holds the blob.
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != want.LayerSize {
			t.Errorf("%s: layer of %d bytes (%v), want %d", want.Platform, n, err, want.LayerSize)
		}
	}
	want := res.Ref + "\n  linux/amd64 " + built.Images[0].Digest + "\n  linux/arm64 " + built.Images[1].Digest + "\n"
	if res.String() != want {
		t.Errorf("output\n%s\nwant\n%s", res, want)
	}
}
