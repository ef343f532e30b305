package apiserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes cfg as a kubeconfig file at path (mode 0600), for
// binaries under test that take --kubeconfig. It keeps the server, CA data
// (or Insecure), bearer token and impersonation, which is all Config,
// UserConfig, ConfigAs and ServiceAccountConfig set.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	if cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
		return errors.New("apiserver: WriteKubeconfig supports inline credentials only")
	}
	const name = "test"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateUID:        cfg.Impersonate.UID,
		ImpersonateGroups:     cfg.Impersonate.Groups,
		ImpersonateUserExtra:  cfg.Impersonate.Extra,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	kc.CurrentContext = name
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// TokenKubeconfig writes a kubeconfig for server with a bearer token into
// dir/name and returns its path: for tests of how a command finds and reads
// one, with no API server behind it.
func TokenKubeconfig(t testing.TB, dir, name, server string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := WriteKubeconfig(path, &rest.Config{Host: server, BearerToken: "t"}); err != nil {
		t.Fatal(err)
	}
	return path
}
