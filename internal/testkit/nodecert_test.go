package testkit

import (
	"crypto/x509"
	"slices"
	"testing"
)

func TestNodeClient(t *testing.T) {
	ca := NewCA(t)
	certPEM, keyPEM := ca.NodeClient(t, "node-a")
	cert := leafOf(t, certPEM, keyPEM)
	if cert.Subject.CommonName != "system:node:node-a" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("not a client certificate of the CA: %v", err)
	}
}
