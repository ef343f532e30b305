package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material one control plane needs, written under dir.
type pki struct {
	caPEM     []byte // the CA that signed the serving certificate
	caFile    string // caPEM's file
	certFile  string // kube-apiserver serving certificate
	keyFile   string // and its key
	saKeyFile string // service account signing key (private)
	saPubFile string // and its public half, for verification
}

// newPKI generates a throwaway CA, a serving certificate for 127.0.0.1 (and
// extra, when valid) and the in-cluster names, and a service account
// signing key, all ECDSA P-256 because it is fast to generate and every
// component accepts it.
func newPKI(dir string, extra ...netip.Addr) (*pki, error) {
	p := &pki{
		caFile:    filepath.Join(dir, "ca.crt"),
		certFile:  filepath.Join(dir, "apiserver.crt"),
		keyFile:   filepath.Join(dir, "apiserver.key"),
		saKeyFile: filepath.Join(dir, "sa.key"),
		saPubFile: filepath.Join(dir, "sa.pub"),
	}
	// 10.96.0.1 is the "kubernetes" Service's cluster IP, the first
	// address of --service-cluster-ip-range; fd00:10:96::1 is it in
	// test/cluster's IPv6-only clusters.
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1), net.ParseIP("fd00:10:96::1")}
	for _, a := range extra {
		if a.IsValid() {
			ips = append(ips, a.AsSlice())
		}
	}
	serving, err := NewServingCert("kube-apiserver", []string{
		"localhost",
		"kubernetes",
		"kubernetes.default",
		"kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
	}, ips)
	if err != nil {
		return nil, err
	}
	p.caPEM = serving.CA
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{p.caFile, serving.CA, 0o644}, {p.certFile, serving.Cert, 0o600}, {p.keyFile, serving.Key, 0o600}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return nil, fmt.Errorf("write %s: %w", filepath.Base(f.path), err)
		}
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	if err := writeKey(p.saKeyFile, saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("marshal service account public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(p.saPubFile, pubPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write service account public key: %w", err)
	}
	return p, nil
}

// ServingCert is a throwaway CA and a serving certificate it signed, PEM
// encoded.
type ServingCert struct {
	CA, Cert, Key []byte
}

// NewServingCert makes a CA valid for a day and, signed by it, an ECDSA
// P-256 serving certificate for commonName, dnsNames and ips.
func NewServingCert(commonName string, dnsNames []string, ips []net.IP) (ServingCert, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ServingCert{}, fmt.Errorf("generate ca key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dnsconfigurer-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return ServingCert{}, fmt.Errorf("create ca certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return ServingCert{}, fmt.Errorf("parse ca certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ServingCert{}, fmt.Errorf("generate serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return ServingCert{}, fmt.Errorf("create serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return ServingCert{}, fmt.Errorf("marshal serving key: %w", err)
	}
	return ServingCert{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key for %q: %w", path, err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	return nil
}
