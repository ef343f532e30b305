package testkit

// The cert-manager v1 fields the deploy/ manifests use. Decoding into these
// strictly (sigs.k8s.io/yaml's UnmarshalStrict) catches a misspelt or
// misplaced field.

// CertManagerMeta is a cert-manager object's metadata.
type CertManagerMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CertManagerIssuerRef names the issuer of a Certificate.
type CertManagerIssuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Group string `json:"group"`
}

// CertManagerIssuer is a cert-manager.io/v1 Issuer: self-signed or a CA.
type CertManagerIssuer struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   CertManagerMeta `json:"metadata"`
	Spec       struct {
		SelfSigned *struct{} `json:"selfSigned,omitempty"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca,omitempty"`
	} `json:"spec"`
}

// CertManagerCertificate is a cert-manager.io/v1 Certificate.
type CertManagerCertificate struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   CertManagerMeta `json:"metadata"`
	Spec       struct {
		IsCA        bool     `json:"isCA,omitempty"`
		CommonName  string   `json:"commonName,omitempty"`
		SecretName  string   `json:"secretName"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		Duration    string   `json:"duration,omitempty"`
		RenewBefore string   `json:"renewBefore,omitempty"`
		Usages      []string `json:"usages,omitempty"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey"`
		IssuerRef CertManagerIssuerRef `json:"issuerRef"`
	} `json:"spec"`
}
