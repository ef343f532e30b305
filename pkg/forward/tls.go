package forward

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// TLSPrefix marks an upstream asked over TLS (RFC 7858), as CoreDNS's
// forward: "tls://ip" (port DefaultTLSPort) or "tls://ip:port".
const TLSPrefix = v1alpha1.TLSPrefix

// DefaultTLSPort is the port of a tls:// upstream without one (RFC 7858).
const DefaultTLSPort = v1alpha1.DefaultTLSPort

// ParseUpstream parses an upstream of Config.Upstreams: ParseAddrPort's
// forms, alone or after TLSPrefix (port 853 by default). tls says which.
func ParseUpstream(s string) (ap netip.AddrPort, tls bool, err error) {
	return v1alpha1.ParseTLSUpstream(s, ParseAddrPort)
}

// TLSFiles are the files and name of a route's TLS settings, as CoreDNS's
// tls and tls_servername options. Empty fields take the defaults.
type TLSFiles struct {
	// ServerName is the name sent (SNI) and verified; "" verifies the
	// upstream's IP address.
	ServerName string
	// CAFile holds the PEM roots the upstreams' certificates are verified
	// against; "" uses the system's.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and key, both or
	// neither.
	CertFile, KeyFile string
}

// LoadTLS reads the files of t into a client TLS config (TLS 1.2 at
// least, as CoreDNS). Its errors name the field whose file failed:
// "caFile", "certFile" or "keyFile".
func LoadTLS(t TLSFiles) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile: %q holds no PEM certificate", t.CAFile)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		if _, err := os.Stat(t.CertFile); err != nil {
			return nil, fmt.Errorf("certFile: %w", err)
		}
		if _, err := os.Stat(t.KeyFile); err != nil {
			return nil, fmt.Errorf("keyFile: %w", err)
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certFile: %q with keyFile %q: %w", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		return nil, fmt.Errorf("keyFile: missing (certFile is set)")
	case t.KeyFile != "":
		return nil, fmt.Errorf("certFile: missing (keyFile is set)")
	}
	return c, nil
}

// upstreamTLS is the TLS config of a tls:// upstream at ap: Config.TLS (the
// system roots when nil) with a session cache, and the upstream's IP
// address as the server name when none is set, as a TLS dialer infers it.
func (f *Forwarder) upstreamTLS(ap netip.AddrPort) *tls.Config {
	var c *tls.Config
	if f.cfg.TLS != nil {
		c = f.cfg.TLS.Clone()
	} else {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.ServerName == "" {
		c.ServerName = ap.Addr().String()
	}
	if c.ClientSessionCache == nil {
		c.ClientSessionCache = f.sessions
	}
	return c
}
