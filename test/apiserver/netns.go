package apiserver

import (
	"context"
	"net"
	"net/netip"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// Network places a control plane inside a network namespace, for a test
// cluster whose kubelet and pods live there (test/cluster). The zero value
// is the default: the test's own namespace, 127.0.0.1, free ports.
type Network struct {
	// NetNSPath is the namespace's bind mount (/run/netns/NAME). etcd and
	// kube-apiserver run in it, and the probes and every rest.Config from
	// this package dial from inside it.
	NetNSPath string
	// Address is kube-apiserver's bind and advertise address, the address
	// the "kubernetes" Service's endpoint names. It must belong to the
	// namespace. etcd stays on the namespace's 127.0.0.1.
	Address netip.Addr
	// Port is kube-apiserver's port; 0 picks a free one.
	Port int
}

// WithNetwork runs the control plane as n says, and readies it for a real
// cluster: the ServiceAccount admission plugin is on (pods get their
// ServiceAccount's token volume) and the "kubernetes" Service's endpoints
// are reconciled to Address (pods reach the API server through it).
func WithNetwork(n Network) Option {
	return func(o *options) { o.network = n }
}

// dialContext opens connections from inside the namespace when one is set.
func (n Network) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	var c net.Conn
	err := n.do(func() (err error) {
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listen opens a listener inside the namespace when one is set.
func (n Network) listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// do runs fn in the namespace, or here when none is set. A socket belongs
// to the namespace of the thread that created it, so fn runs on a thread
// switched into the namespace, which is discarded afterwards (the goroutine
// exits while still locked to it).
func (n Network) do(fn func() error) error {
	if n.NetNSPath == "" {
		return fn()
	}
	return testkit.InNetNS(n.NetNSPath, fn)
}

// command returns bin's command line, wrapped in nsenter when the control
// plane runs in a namespace.
func (n Network) command(bin string, args []string) (string, []string) {
	if n.NetNSPath == "" {
		return bin, args
	}
	return "nsenter", append([]string{"--net=" + n.NetNSPath, "--", bin}, args...)
}

// address is the API server's bind address.
func (n Network) address() string {
	if n.Address.IsValid() {
		return n.Address.String()
	}
	return "127.0.0.1"
}
