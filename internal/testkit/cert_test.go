package testkit

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestCA(t *testing.T) {
	ca := NewCA(t)
	certPEM, keyPEM, serial := ca.Serving(t, "web", "web.example")
	leaf := leafOf(t, certPEM, keyPEM)
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "web.example"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: ca.Pool()}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	if serial != 2 || leaf.SerialNumber.Int64() != 2 || leaf.Subject.CommonName != "web" {
		t.Errorf("serial %d (certificate %v), CN %q; want 2 after the CA's 1, web", serial, leaf.SerialNumber, leaf.Subject.CommonName)
	}
	client, err := x509.ParseCertificate(ca.Client(t, "client").Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: NewCA(t).Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("another CA trusts the client certificate")
	}
}

// leafOf is the certificate of a PEM pair that goes together.
func leafOf(t *testing.T, certPEM, keyPEM []byte) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}
