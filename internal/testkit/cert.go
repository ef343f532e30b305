package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test. Its certificates are
// valid from an hour ago for a day, with P-256 keys.
type CA struct {
	Cert   *x509.Certificate
	PEM    []byte // Cert in PEM, for a CA file
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

// NewCA makes a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	ca := &CA{key: newKey(t)}
	ca.serial.Store(1)
	tmpl := ca.template(pkix.Name{CommonName: "dnsconfigurer test CA"})
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage |= x509.KeyUsageCertSign
	der := ca.sign(t, tmpl, tmpl, ca.key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca.Cert, ca.PEM = cert, pemBlock("CERTIFICATE", der)
	return ca
}

// Pool is a pool that trusts the CA only.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Serving makes a server certificate named cn for 127.0.0.1, ::1,
// localhost and dnsNames. It returns the PEM pair and the serial number,
// which grows with each certificate.
func (ca *CA) Serving(t testing.TB, cn string, dnsNames ...string) (certPEM, keyPEM []byte, serial int64) {
	t.Helper()
	key := newKey(t)
	tmpl := ca.template(pkix.Name{CommonName: cn})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames = append([]string{"localhost"}, dnsNames...)
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	der := ca.sign(t, tmpl, ca.Cert, key)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", kder), tmpl.SerialNumber.Int64()
}

// ServingFor makes a server certificate named cn for hosts only: each an
// IP address or a DNS name. It returns the PEM pair.
func (ca *CA) ServingFor(t testing.TB, cn string, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := ca.template(pkix.Name{CommonName: cn})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der := ca.sign(t, tmpl, ca.Cert, key)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", kder)
}

// Client makes a client certificate named cn.
func (ca *CA) Client(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := ca.template(pkix.Name{CommonName: cn})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return tls.Certificate{Certificate: [][]byte{ca.sign(t, tmpl, ca.Cert, key)}, PrivateKey: key}
}

// template is a certificate of subject with the next serial number.
func (ca *CA) template(subject pkix.Name) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1) - 1),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func (ca *CA) sign(t testing.TB, tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
