package imagebuild

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions say how to reach the registry. The zero value trusts the
// system's CAs, wants TLS and takes credentials from the docker config.
type PushOptions struct {
	// CAFile, when set, is a PEM bundle trusted for the registry's TLS
	// besides the system's CAs.
	CAFile string
	// PlainHTTP talks HTTP to a registry without TLS.
	PlainHTTP bool
	// Keychain gives the credentials; nil is authn.DefaultKeychain (the
	// docker config and its credential helpers).
	Keychain authn.Keychain
	// Dial, when set, opens the connections, e.g. inside a network
	// namespace. Nil is the default dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// PushResult is what Push put in the registry.
type PushResult struct {
	// Ref is the pushed index by digest: "registry/repo@sha256:...".
	Ref string
	// Digest is the index's digest, the archive's.
	Digest string
	// Images are the index's manifests in index order.
	Images []PushedImage
	// Bytes is the size of every manifest, config and layer, pushed or
	// already there.
	Bytes int64
	// Took is how long the push took.
	Took time.Duration
}

// String is what hack/push-image prints: the pushed reference by digest on
// the first line, then a line per platform with its manifest digest.
func (r PushResult) String() string {
	var b strings.Builder
	fmt.Fprintln(&b, r.Ref)
	for _, img := range r.Images {
		fmt.Fprintf(&b, "  %s %s\n", img.Platform, img.Digest)
	}
	return b.String()
}

// PushedImage is one platform's manifest in a pushed index.
type PushedImage struct {
	// Platform is "linux/amd64" or "linux/arm64".
	Platform string
	// Digest is the image manifest's digest.
	Digest string
}

// ReadArchive reads the image index of an archive Build wrote (the OCI
// image layout in it; its docker-save manifest.json is ignored). The blobs
// are extracted into dir, which must exist; the index reads them from
// there.
func ReadArchive(archive, dir string) (v1.ImageIndex, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("image archive %s: %w", archive, err)
		}
		if hdr.Typeflag != tar.TypeReg || !layoutFile.MatchString(hdr.Name) {
			continue // directories, manifest.json, anything unknown
		}
		if err := extract(tr, filepath.Join(dir, filepath.FromSlash(hdr.Name))); err != nil {
			return nil, fmt.Errorf("image archive %s: %s: %w", archive, hdr.Name, err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image archive %s: not an OCI image layout (no index.json or oci-layout): %w", archive, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image archive %s: index.json: %w", archive, err)
	}
	for _, d := range im.Manifests {
		if !d.MediaType.IsIndex() {
			continue
		}
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("image archive %s: image index %s: %w", archive, d.Digest, err)
		}
		return idx, nil
	}
	return nil, fmt.Errorf("image archive %s: index.json names no image index (%d entries): build it with hack/build-image", archive, len(im.Manifests))
}

// layoutFile matches the files of an OCI image layout that ReadArchive
// takes; nothing else is written, so no name escapes dir.
var layoutFile = regexp.MustCompile(`^(oci-layout|index\.json|blobs/sha256/[0-9a-f]{64})$`)

// extract writes r to path, creating its directory.
func extract(r io.Reader, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Push pushes the image index of archive (as Build writes it) to ref, a
// registry/repository:tag, with every platform's manifest, config and
// layers. The digests stay those of the archive: Push checks that the
// registry serves the tag at the archive's index digest.
func Push(ctx context.Context, archive, ref string, opts PushOptions) (PushResult, error) {
	start := time.Now()
	var nameOpts []name.Option
	if opts.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	tag, err := name.NewTag(ref, nameOpts...)
	if err != nil {
		return PushResult{}, fmt.Errorf("image reference %q: want REGISTRY/REPOSITORY:TAG: %w", ref, err)
	}
	dir, err := os.MkdirTemp("", "dnsconfigurer-push-")
	if err != nil {
		return PushResult{}, fmt.Errorf("push: %w", err)
	}
	defer os.RemoveAll(dir)
	idx, err := ReadArchive(archive, dir)
	if err != nil {
		return PushResult{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return PushResult{}, fmt.Errorf("image archive %s: %w", archive, err)
	}
	res := PushResult{Ref: tag.Context().Digest(digest.String()).String(), Digest: digest.String()}
	if res.Images, res.Bytes, err = describe(idx); err != nil {
		return PushResult{}, fmt.Errorf("image archive %s: %w", archive, err)
	}
	tr, err := opts.transport()
	if err != nil {
		return PushResult{}, err
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ro := []remote.Option{remote.WithContext(ctx), remote.WithTransport(tr), remote.WithAuthFromKeychain(kc)}
	if err := remote.WriteIndex(tag, idx, ro...); err != nil {
		return PushResult{}, fmt.Errorf("push %s to %s: %w", archive, tag, err)
	}
	got, err := remote.Head(tag, ro...)
	if err != nil {
		return PushResult{}, fmt.Errorf("read back %s: %w", tag, err)
	}
	if got.Digest != digest {
		return PushResult{}, fmt.Errorf("read back %s: the registry serves %s, the archive's index is %s", tag, got.Digest, digest)
	}
	res.Took = time.Since(start)
	return res, nil
}

// describe lists idx's platform manifests and adds up the size of every
// blob it holds (its own manifest too).
func describe(idx v1.ImageIndex) ([]PushedImage, int64, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, 0, err
	}
	size, err := idx.Size()
	if err != nil {
		return nil, 0, err
	}
	var out []PushedImage
	for _, d := range im.Manifests {
		p := "unknown"
		if d.Platform != nil {
			p = d.Platform.String()
		}
		out = append(out, PushedImage{Platform: p, Digest: d.Digest.String()})
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, 0, fmt.Errorf("image %s: %w", p, err)
		}
		m, err := img.Manifest()
		if err != nil {
			return nil, 0, fmt.Errorf("image %s: %w", p, err)
		}
		size += d.Size + m.Config.Size
		for _, l := range m.Layers {
			size += l.Size
		}
	}
	return out, size, nil
}

// transport is remote's default transport with the CA file trusted and
// the dialer set.
func (opts PushOptions) transport() (http.RoundTripper, error) {
	tr := remote.DefaultTransport.(*http.Transport).Clone()
	if opts.Dial != nil {
		tr.DialContext = opts.Dial
	}
	if opts.CAFile == "" {
		return tr, nil
	}
	pem, err := os.ReadFile(opts.CAFile)
	if err != nil {
		return nil, fmt.Errorf("registry ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("registry ca %s: %w", opts.CAFile, errNoCerts)
	}
	tr.TLSClientConfig = tr.TLSClientConfig.Clone()
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	return tr, nil
}

var errNoCerts = errors.New("no PEM certificate in it")
