package testkit

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
)

// NodeClient makes the client certificate a kubelet of node has: CN
// system:node:<node>, O system:nodes. It returns the certificate and key
// in PEM.
func (ca *CA) NodeClient(t testing.TB, node string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := ca.template(pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	der := ca.sign(t, tmpl, ca.Cert, key)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", kder)
}
