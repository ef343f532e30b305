package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
)

// certReloader serves the latest good certificate and key from two files.
// GetCertificate runs on every TLS handshake, so a new pair is used by new
// connections while established ones keep theirs.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	m                 *metrics
	debounce          time.Duration

	cur atomic.Pointer[tls.Certificate]

	mu              sync.Mutex // guards the bytes of the pair in use
	certPEM, keyPEM []byte
}

func newCertReloader(certFile, keyFile string, debounce time.Duration, log *slog.Logger, m *metrics) (*certReloader, error) {
	c := &certReloader{certFile: certFile, keyFile: keyFile, log: log, m: m, debounce: debounce}
	if _, err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (c *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// load reads both files and switches to them if they changed and form a
// good pair. changed is false when the files still hold the pair in use.
func (c *certReloader) load() (changed bool, err error) {
	certPEM, err := safefile.ReadNamed(c.certFile, maxPEMFile)
	if err != nil {
		return false, fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := safefile.ReadNamed(c.keyFile, maxPEMFile)
	if err != nil {
		return false, fmt.Errorf("read private key: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("load certificate %q and key %q: %w", c.certFile, c.keyFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return false, fmt.Errorf("parse certificate %q: %w", c.certFile, err)
		}
		pair.Leaf = leaf
	}
	c.certPEM, c.keyPEM = certPEM, keyPEM
	c.cur.Store(&pair)
	c.m.notAfter.Set(float64(leaf.NotAfter.Unix()))
	return true, nil
}

// maxPEMFile caps the certificate and key files: a chain of a few
// certificates is a few KiB.
const maxPEMFile = 1 << 20

// reload is load after a file change, reported to the log and metrics.
func (c *certReloader) reload() {
	changed, err := c.load()
	switch {
	case err != nil:
		c.m.reloads.WithLabelValues("error").Inc()
		c.log.Error("serving certificate not reloaded; keeping the previous one", "err", err)
	case changed:
		c.m.reloads.WithLabelValues("ok").Inc()
		leaf := c.cur.Load().Leaf
		c.log.Info("serving certificate reloaded", "subject", leaf.Subject.String(), "dnsNames", leaf.DNSNames, "notAfter", leaf.NotAfter)
	}
}

// watch watches both files until ctx is done (internal/filewatch: their
// directories, which also sees renames and a Secret volume's ..data swap,
// and a stat poll). Call run to act on the changes.
func (c *certReloader) watch(ctx context.Context) (<-chan struct{}, error) {
	changes, err := filewatch.Watch(ctx, []string{c.certFile, c.keyFile},
		filewatch.WithDebounce(c.debounce, 0), filewatch.WithLogger(c.log))
	if err != nil {
		return nil, fmt.Errorf("watch certificate files: %w", err)
	}
	return changes, nil
}

// run reloads after every burst of changes until the watch stops.
func (c *certReloader) run(changes <-chan struct{}) {
	// A change between the first load and the watch would go unseen.
	c.reload()
	for range changes {
		c.reload()
	}
}
