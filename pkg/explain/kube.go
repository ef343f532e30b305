package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// maxRead caps what explain reads from an agent or a container.
const maxRead = 1 << 20

// PortForwarder gets /node-settings through a port-forward to the agent
// pod (the API server's pods/portforward; a hostNetwork agent's forward
// lands in the node's network namespace, where it listens on 127.0.0.1).
type PortForwarder struct {
	Config *rest.Config
	Client kubernetes.Interface
}

var _ SettingsFetcher = PortForwarder{}

// NodeSettings forwards a local port to the agent's port and GETs
// /node-settings through it.
func (p PortForwarder) NodeSettings(ctx context.Context, agent *corev1.Pod, port int32) (nodesettings.Settings, error) {
	transport, upgrader, err := spdy.RoundTripperFor(p.Config)
	if err != nil {
		return nodesettings.Settings{}, err
	}
	url := p.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(agent.Namespace).Name(agent.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	var errOut bytes.Buffer
	fw, err := portforward.NewOnAddressesWithContext(fctx, dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(port))}, ready, io.Discard, &errOut)
	if err != nil {
		return nodesettings.Settings{}, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		return nodesettings.Settings{}, fmt.Errorf("port-forward: %w", rbacHint(orDone(err), "create pods/portforward in namespace "+agent.Namespace))
	case <-ctx.Done():
		return nodesettings.Settings{}, fmt.Errorf("port-forward: %w", ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		return nodesettings.Settings{}, fmt.Errorf("port-forward: no local port: %v", err)
	}
	s, err := GetNodeSettings(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", ports[0].Local, nodesettings.Path))
	if err != nil && errOut.Len() > 0 {
		err = fmt.Errorf("%w (%s)", err, strings.TrimSpace(errOut.String()))
	}
	stop()
	<-done
	return s, err
}

func orDone(err error) error {
	if err == nil {
		return errors.New("ended before it was ready")
	}
	return err
}

// GetNodeSettings GETs and decodes a /node-settings URL; a 404 is
// ErrAgentTooOld.
func GetNodeSettings(ctx context.Context, url string) (nodesettings.Settings, error) {
	var s nodesettings.Settings
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return s, ErrAgentTooOld
	case resp.StatusCode != http.StatusOK:
		return s, fmt.Errorf("GET %s: %s", nodesettings.Path, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRead)).Decode(&s); err != nil {
		return s, fmt.Errorf("GET %s: %w", nodesettings.Path, err)
	}
	return s, nil
}

// PodExec reads a container's /etc/resolv.conf with `cat` through the API
// server's pods/exec.
type PodExec struct {
	Config *rest.Config
	Client kubernetes.Interface
}

var _ ResolvReader = PodExec{}

// ResolvConf runs cat /etc/resolv.conf in the container.
func (p PodExec) ResolvConf(ctx context.Context, pod *corev1.Pod, container string) ([]byte, error) {
	req := p.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"cat", "/etc/resolv.conf"}, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(p.Config, http.MethodPost, req.URL())
	if err != nil {
		return nil, err
	}
	stdout, stderr := &capped{limit: maxRead}, &capped{limit: 4 << 10}
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr}); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("exec cat /etc/resolv.conf: %w: %s", err, msg)
		}
		return nil, fmt.Errorf("exec cat /etc/resolv.conf (no cat in the image?): %w", err)
	}
	return stdout.Bytes(), nil
}

// capped is a buffer that drops what comes after limit bytes.
type capped struct {
	bytes.Buffer
	limit int
}

func (c *capped) Write(b []byte) (int, error) {
	if room := c.limit - c.Len(); room < len(b) {
		c.Buffer.Write(b[:max(room, 0)])
		return len(b), nil
	}
	return c.Buffer.Write(b)
}
