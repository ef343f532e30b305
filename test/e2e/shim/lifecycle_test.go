package shim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestLifecycle runs a container's whole life through the shim (create,
// start, exec, logs, status, list, stop, remove, image calls) and compares
// the pass-through answers with containerd's own.
func TestLifecycle(t *testing.T) {
	h := containerd.Start(t, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	s := startShim(t, h)
	c, direct := h.Dial(s.Socket), h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// GetContainerEvents: whatever containerd answers (1.6 does not
	// implement it; 2.x streams, and with nothing happening the 2 s
	// deadline ends the stream), the shim answers the same. A deadline's
	// message depends on which side noticed it first (the client's timer,
	// or the server's RST_STREAM, which the relay passes on), so only its
	// code is compared.
	first := func(c *containerd.Client) (*runtimeapi.ContainerEventResponse, error) {
		evCtx, evCancel := context.WithTimeout(ctx, 2*time.Second)
		defer evCancel()
		return firstEvent(evCtx, c)
	}
	viaShim, errShim := first(c)
	viaDirect, errDirect := first(direct)
	sameMessage := status.Code(errShim) == codes.DeadlineExceeded || status.Convert(errShim).Message() == status.Convert(errDirect).Message()
	if status.Code(errShim) != status.Code(errDirect) || !sameMessage || (viaShim == nil) != (viaDirect == nil) {
		t.Errorf("GetContainerEvents via the shim = %v, %v; direct = %v, %v", viaShim, errShim, viaDirect, errDirect)
	}
	t.Logf("GetContainerEvents through the shim: %v", status.Convert(errShim).Code())

	// RuntimeConfig (the cgroup driver kubelet adopts; containerd 2.x
	// answers it, 1.6 does not): passed through untouched.
	rcShim, errShim := c.Runtime.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	rcDirect, errDirect := direct.Runtime.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if status.Code(errShim) != status.Code(errDirect) || status.Convert(errShim).Message() != status.Convert(errDirect).Message() || !proto.Equal(rcShim, rcDirect) {
		t.Errorf("RuntimeConfig via the shim = %v, %v; direct = %v, %v", rcShim, errShim, rcDirect, errDirect)
	}
	if h.ContainerdMajor >= 2 && (errShim != nil || rcShim.GetLinux().GetCgroupDriver() != runtimeapi.CgroupDriver_CGROUPFS) {
		t.Errorf("RuntimeConfig through the shim from containerd %d: %v, %v; want the cgroupfs driver of its config", h.ContainerdMajor, rcShim, errShim)
	}
	if errShim == nil {
		t.Logf("RuntimeConfig through the shim: cgroup driver %v", rcShim.GetLinux().GetCgroupDriver())
	} else {
		t.Logf("RuntimeConfig through the shim: %v", status.Code(errShim))
	}

	want := render(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "life", Namespace: "team"}, Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst}})
	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: "life", Namespace: "team", Hostname: "life", DNS: want.DNSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	main, err := c.CreateContainer(ctx, pod, "main")
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: main.ID})
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("ContainerStatus after create = %v, %v", st, err)
	}
	if _, err := c.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: main.ID}); err != nil {
		t.Fatal(err)
	}
	report, err := c.StartContainer(ctx, pod, "report", "cat", "/etc/resolv.conf", "/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}

	// Exec: output, and a non-zero exit passed through as such.
	r, err := c.Exec(ctx, main.ID, containerd.TestBinary, "cat", "/etc/resolv.conf")
	if err != nil || r.ExitCode != 0 || string(r.Stdout) != containerd.ResolvConfFor(want.DNSConfig()) {
		t.Errorf("Exec cat resolv.conf = %q (exit %d), %v", r.Stdout, r.ExitCode, err)
	}
	r, err = c.Exec(ctx, main.ID, containerd.TestBinary, "cat", "/no/such/file")
	if err != nil || r.ExitCode == 0 || len(r.Stderr) == 0 {
		t.Errorf("Exec of a failing command = exit %d, stderr %q, %v", r.ExitCode, r.Stderr, err)
	}

	// Logs of the container that exited.
	if code, err := c.WaitExit(ctx, report.ID); err != nil || code != 0 {
		t.Fatalf("report exit %d, %v", code, err)
	}
	// containerd copies the container's output to the log asynchronously:
	// poll until it is all there.
	wantLog := containerd.ResolvConfFor(want.DNSConfig()) + "life\n"
	testkit.WaitFor(t, 10*time.Second, func() error {
		if stdout, stderr, err := c.Logs(report); err != nil || stdout != wantLog || stderr != "" {
			return fmt.Errorf("logs = %q, %q, %v; want %q", stdout, stderr, err, wantLog)
		}
		return nil
	})

	// Status and list calls answer as containerd does.
	for _, call := range []struct {
		name string
		do   func(*containerd.Client) (proto.Message, error)
	}{
		{"Version", func(c *containerd.Client) (proto.Message, error) {
			return c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
		}},
		{"ListContainers", func(c *containerd.Client) (proto.Message, error) {
			return c.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: pod.ID}})
		}},
		{"ListPodSandbox", func(c *containerd.Client) (proto.Message, error) {
			return c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		}},
		{"PodSandboxStatus", func(c *containerd.Client) (proto.Message, error) {
			return c.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pod.ID})
		}},
		{"ContainerStatus", func(c *containerd.Client) (proto.Message, error) {
			return c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: report.ID})
		}},
		{"ListImages", func(c *containerd.Client) (proto.Message, error) {
			return c.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		}},
		{"ImageStatus", func(c *containerd.Client) (proto.Message, error) {
			return c.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: containerd.TestImage}})
		}},
		{"ImageFsInfo", func(c *containerd.Client) (proto.Message, error) {
			return c.Images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		}},
		{"ContainerStatus unknown", func(c *containerd.Client) (proto.Message, error) {
			return c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "no-such-container"})
		}},
		{"PullImage (no network)", func(c *containerd.Client) (proto.Message, error) {
			return c.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "127.0.0.1:1/none:1"}})
		}},
	} {
		got, errGot := call.do(c)
		exp, errExp := call.do(direct)
		// ImageFsInfo carries a timestamp: never equal.
		differ := func() bool {
			return errGot == nil && errExp == nil && call.name != "ImageFsInfo" && !proto.Equal(got, exp)
		}
		if differ() {
			// State may move between the two calls (a container's exit
			// being recorded): ask both again for a while.
			testkit.Poll(time.Second, 100*time.Millisecond, func() bool {
				got, errGot = call.do(c)
				exp, errExp = call.do(direct)
				return !differ()
			})
		}
		if status.Code(errGot) != status.Code(errExp) {
			t.Errorf("%s: via the shim %v, direct %v", call.name, errGot, errExp)
			continue
		}
		if differ() {
			t.Errorf("%s via the shim differs:\n%v\ndirect:\n%v", call.name, got, exp)
		}
	}
	if _, err := c.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil {
		t.Error(err)
	}

	// Stop and remove.
	if err := c.StopContainer(ctx, main.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveContainer(ctx, main.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePod(ctx, pod.ID); err != nil {
		t.Fatal(err)
	}
	list, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("ListPodSandbox after removal = %v, %v", list, err)
	}
	if _, err := c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: main.ID}); status.Code(err) != codes.NotFound {
		t.Errorf("ContainerStatus of a removed container = %v, want NotFound", err)
	}
}

func firstEvent(ctx context.Context, c *containerd.Client) (*runtimeapi.ContainerEventResponse, error) {
	stream, err := c.Runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return nil, err
	}
	return stream.Recv()
}

// TestParallelSandboxes creates 50 sandboxes at once through the shim, half
// of them autopath pods, and checks each container's /etc/resolv.conf.
func TestParallelSandboxes(t *testing.T) {
	h := containerd.Start(t, containerd.Options{HostResolvConf: testkit.HostResolvConf})
	s := startShim(t, h)
	c := h.Dial(s.Socket)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eng, err := policy.New(testkit.NodeWithNodeLocal())
	if err != nil {
		t.Fatal(err)
	}
	host := policy.Host{Nameservers: []string{"10.233.0.1", "10.233.0.2"}, Searches: []string{"host.test", "corp.test"}, Options: []string{"timeout:2", "attempts:3"}}

	const n = 50
	begin := time.Now()
	testkit.Parallel(t, n, func(i int) error { return parallelPod(ctx, c, eng, host, i) })
	t.Logf("%d sandboxes with a container each through the shim, in parallel: %v", n, time.Since(begin).Round(time.Millisecond))
	if v := s.metrics(t)[`dnsconfigurer_cri_sandboxes_total{outcome="rewritten",source="sandbox"}`]; v != n/2 {
		t.Errorf("rewritten sandboxes = %v, want %d", v, n/2)
	}
}

func parallelPod(ctx context.Context, c *containerd.Client, eng *policy.Engine, host policy.Host, i int) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: fmt.Sprintf("ns%d", i),
		UID: types.UID(fmt.Sprint("uid-", i)), Annotations: map[string]string{}}, Spec: corev1.PodSpec{DNSPolicy: corev1.DNSClusterFirst}}
	if i%2 == 0 {
		pod.Annotations[policy.AnnotationDNSPolicy] = autopath
	}
	kubelet, err := eng.Compute(podspec.Input(kubeletView(pod)), host)
	if err != nil {
		return err
	}
	want, err := eng.Compute(podspec.Input(pod), host)
	if err != nil {
		return err
	}
	sb, err := c.RunPod(ctx, containerd.PodSpec{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), Hostname: kubelet.Hostname,
		DNS: &runtimeapi.DNSConfig{Servers: kubelet.Nameservers, Searches: kubelet.Searches, Options: kubelet.Options}, Annotations: pod.Annotations})
	if err != nil {
		return err
	}
	_, got, err := c.StartResolvConf(ctx, sb, "main")
	if err != nil {
		return err
	}
	if exp := containerd.ResolvConfFor(&runtimeapi.DNSConfig{Servers: want.Nameservers, Searches: want.Searches, Options: want.Options}); got != exp {
		return fmt.Errorf("pod %d: /etc/resolv.conf = %q, want %q", i, got, exp)
	}
	if i%2 == 0 && !strings.Contains(got, "search.ns"+fmt.Sprint(i)+".cluster.local.ap.k8s.io") {
		return fmt.Errorf("pod %d: no autopath search in %q", i, got)
	}
	return c.RemovePod(ctx, sb.ID)
}
