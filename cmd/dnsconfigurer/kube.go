package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

// kubeClient is the API server client of a component, with the component
// and the build in its User-Agent ("dnsconfigurer-shim/v0.2.0 ..."): from
// the kubeconfig at path (--kubeconfig, or the config file's kubeconfig),
// else from $KUBECONFIG (a list of files, as kubectl reads it), else the
// in-cluster config when running in a pod. Nil when none applies.
func kubeClient(path, component string) (kubernetes.Interface, error) {
	_, c, err := kubeREST(path, component)
	return c, err
}

// kubeREST is kubeClient with the config it was made from (the User-Agent
// set), for the clients of other kinds a component makes; both nil when
// no config applies.
func kubeREST(path, component string) (*rest.Config, kubernetes.Interface, error) {
	rc, err := restConfig(path)
	if err != nil || rc == nil {
		return nil, nil, err
	}
	rc.UserAgent = version.Get().UserAgent(component)
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return rc, c, nil
}

// restConfig is kubeClient's choice of config.
func restConfig(path string) (*rest.Config, error) {
	if rules, what := kubeconfigRules(path); rules != nil {
		rc, err := loadKubeconfig(rules)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return rc, nil
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return rc, nil
	}
	return nil, nil
}

// kubeconfigRules are the loading rules of the kubeconfig at path, else of
// $KUBECONFIG's files, named by what for errors; nil without either.
func kubeconfigRules(path string) (rules *clientcmd.ClientConfigLoadingRules, what string) {
	if path != "" {
		return &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, fmt.Sprintf("kubeconfig %q", path)
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}, fmt.Sprintf("$KUBECONFIG %q", env)
	}
	return nil, ""
}

// loadKubeconfig reads the kubeconfig files of rules, without prompting.
func loadKubeconfig(rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// kubeNamespace is the namespace of the kubeconfig's current context, as
// kubectl takes it (path, else $KUBECONFIG), or "default".
func kubeNamespace(path string) string {
	rules, _ := kubeconfigRules(path)
	if rules == nil {
		return "default"
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}
