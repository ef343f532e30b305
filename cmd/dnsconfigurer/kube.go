package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
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
	return kubeFor(rc, component)
}

// kubeFor is the client of rc, rc with the component's User-Agent. The
// typed client speaks protobuf, as kubelet and CoreDNS do: a watch event
// decodes in a fraction of JSON's CPU. rc itself stays JSON, for the
// clients of other kinds (CRDs have no protobuf form).
func kubeFor(rc *rest.Config, component string) (*rest.Config, kubernetes.Interface, error) {
	rc.UserAgent = version.Get().UserAgent(component)
	pc := rest.CopyConfig(rc)
	pc.ContentType = runtime.ContentTypeProtobuf
	pc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c, err := kubernetes.NewForConfig(pc)
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

// kubectlFlags are kubectl's flags that choose the API server, the
// credentials and the namespace, for a command run by a person (explain).
type kubectlFlags struct {
	kubeconfig, context, cluster, user, namespace string
}

func (k *kubectlFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig `PATH` (default: the files of $KUBECONFIG, else ~/.kube/config, else the in-cluster config)")
	fs.StringVar(&k.context, "context", "", "the kubeconfig context to use (default: its current-context)")
	fs.StringVar(&k.cluster, "cluster", "", "the kubeconfig cluster to use (default: the context's)")
	fs.StringVar(&k.user, "user", "", "the kubeconfig user to use (default: the context's)")
	fs.StringVar(&k.namespace, "n", "", "the pod's namespace (default: the context's, else default)")
	fs.StringVar(&k.namespace, "namespace", "", "the pod's namespace (same as -n)")
}

// clientConfig loads the kubeconfig as kubectl does, with client-go's
// default loading rules: --kubeconfig, else $KUBECONFIG's files merged,
// else ~/.kube/config; the in-cluster config when none of them exists.
// --context, --cluster, --user and -n override what the files say.
func (k kubectlFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	o := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	o.Context.Cluster, o.Context.AuthInfo, o.Context.Namespace = k.cluster, k.user, k.namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, o)
}

// client is the API server client of component with its config, and the
// namespace: -n, else the context's, else the pod's own in a cluster, else
// "default".
func (k kubectlFlags) client(component string) (*rest.Config, kubernetes.Interface, string, error) {
	cc := k.clientConfig()
	rc, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, nil, "", errors.New("no API server: give --kubeconfig, set $KUBECONFIG or write ~/.kube/config")
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	rc, c, err := kubeFor(rc, component)
	return rc, c, ns, err
}
