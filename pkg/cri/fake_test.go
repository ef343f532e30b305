package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// fakeRuntime is a CRI runtime for tests, on a unix socket. It records the
// sandbox configs it gets and the metadata and deadline of the last call.
// Embedding the Unimplemented servers is fine here: it is the runtime, not
// the proxy.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	containers int // ListContainers answers this many

	mu        sync.Mutex
	sandboxes []*runtimeapi.PodSandboxConfig
	lastMD    metadata.MD
	deadline  time.Time
}

func (f *fakeRuntime) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	dl, _ := ctx.Deadline()
	f.mu.Lock()
	f.lastMD, f.deadline = md, dl
	f.mu.Unlock()
}

func (f *fakeRuntime) last() (metadata.MD, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastMD, f.deadline
}

func (f *fakeRuntime) sandbox(i int) *runtimeapi.PodSandboxConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i < 0 {
		i += len(f.sandboxes)
	}
	if i < 0 || i >= len(f.sandboxes) {
		return nil
	}
	return f.sandboxes[i]
}

func (f *fakeRuntime) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	f.record(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-runtime-header", "h1"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-runtime-trailer", "t1"))
	return &runtimeapi.VersionResponse{Version: req.Version, RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	f.record(ctx)
	f.mu.Lock()
	f.sandboxes = append(f.sandboxes, req.Config)
	n := len(f.sandboxes)
	f.mu.Unlock()
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: fmt.Sprintf("sandbox-%d", n)}, nil
}

func (f *fakeRuntime) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	f.record(ctx)
	st, err := status.New(codes.NotFound, "container \""+req.ContainerId+"\" not found").
		WithDetails(durationpb.New(42 * time.Second))
	if err != nil {
		return nil, err
	}
	return nil, st.Err()
}

func (f *fakeRuntime) ListContainers(ctx context.Context, _ *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	resp := &runtimeapi.ListContainersResponse{}
	for i := range f.containers {
		resp.Containers = append(resp.Containers, testContainer(i))
	}
	return resp, nil
}

func testContainer(i int) *runtimeapi.Container {
	id := fmt.Sprintf("%064x", i)
	return &runtimeapi.Container{
		Id: id, PodSandboxId: fmt.Sprintf("%064x", i/2),
		Metadata:    &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("container-%d", i), Attempt: 1},
		Image:       &runtimeapi.ImageSpec{Image: "registry.example/app:1.0"},
		ImageRef:    "sha256:" + id,
		State:       runtimeapi.ContainerState_CONTAINER_RUNNING,
		CreatedAt:   time.Now().UnixNano(),
		Labels:      map[string]string{"io.kubernetes.container.name": "app", "io.kubernetes.pod.name": fmt.Sprintf("pod-%d", i/2), "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": id[:36]},
		Annotations: map[string]string{"io.kubernetes.container.hash": "abcdef", "io.kubernetes.container.restartCount": "0", "io.kubernetes.container.terminationMessagePath": "/dev/termination-log"},
		ImageId:     "sha256:" + id,
	}
}

func (f *fakeRuntime) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	f.record(stream.Context())
	for i := range 3 {
		if err := stream.Send(&runtimeapi.ContainerEventResponse{ContainerId: fmt.Sprint("c", i), ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT}); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return status.Error(codes.Canceled, "events stream cancelled")
}

func (f *fakeRuntime) ListImages(ctx context.Context, _ *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	f.record(ctx)
	return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{{Id: "sha256:1", RepoTags: []string{"a:1"}, Size: 7}}}, nil
}

// futureMethod is a method this build of cri-api does not have.
const futureMethod = "/runtime.v1.RuntimeService/FutureMethod"

// echo answers unknown methods: it sends every request back, prefixed with
// the method name, then ends with a trailer.
func (f *fakeRuntime) echo(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	f.record(ss.Context())
	if method != futureMethod {
		return status.Errorf(codes.Unimplemented, "fake runtime: unknown method %s", method)
	}
	ss.SetTrailer(metadata.Pairs("x-echo", "done"))
	for {
		var b rawBytes
		if err := ss.RecvMsg(&b); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		out := rawBytes(append([]byte("echo:"), b...))
		if err := ss.SendMsg(&out); err != nil {
			return err
		}
	}
}

// rawBytes is a message for rawCodec.
type rawBytes []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*rawBytes); ok {
		return *b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*rawBytes); ok {
		*b = append([]byte(nil), data...)
		return nil
	}
	return proto.Unmarshal(data, v.(proto.Message))
}
func (rawCodec) Name() string { return "proto" }

// startRuntime serves f on path until the test ends; stop stops it early.
func startRuntime(t testing.TB, f *fakeRuntime, path string) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(f.echo), grpc.ForceServerCodec(rawCodec{}))
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	runtimeapi.RegisterImageServiceServer(srv, f)
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func newServerForTest(endpoint string, opts ...Option) (*Server, error) {
	eng, err := policy.New(testNode)
	if err != nil {
		return nil, err
	}
	return New(endpoint, eng, hostSnap(nil, nil, nil), opts...)
}

// fakeHost is a HostConfig with a fixed snapshot.
type fakeHost struct {
	mu   sync.Mutex
	snap hostresolv.Snapshot
}

func (h *fakeHost) Current() hostresolv.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap
}

func hostSnap(ns, searches, opts []string) *fakeHost {
	return &fakeHost{snap: hostresolv.Snapshot{Path: "/etc/resolv.conf", Generation: 1,
		Config: resolvconf.Config{Nameservers: ns, Searches: searches, Options: opts},
		Raw:    resolvconf.Config{Nameservers: ns, Searches: searches, Options: opts}}}
}

// fakeLookup is a PodLookup from a map.
type fakeLookup map[string]policy.Input

func (f fakeLookup) Pod(_ context.Context, uid string) (policy.Input, bool) {
	in, ok := f[uid]
	return in, ok
}

// fakeEvents records Events.
type fakeEvents struct {
	mu     sync.Mutex
	events []string
}

func (f *fakeEvents) Warning(pod podfacts.PodRef, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, pod.Namespace+"/"+pod.Name+" "+reason+": "+message)
}

func (f *fakeEvents) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

// testNode is the node of the unit tests.
var testNode = policy.Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", NodeLocalDNS: []string{"169.254.20.10"}}

// env is a fake runtime with a shim in front of it.
type env struct {
	rt      *fakeRuntime
	rtStop  func()
	rtPath  string
	shim    *Server
	path    string
	conn    *grpc.ClientConn
	runtime runtimeapi.RuntimeServiceClient
	images  runtimeapi.ImageServiceClient
	direct  runtimeapi.RuntimeServiceClient
}

func newEnv(t testing.TB, host HostConfig, opts ...Option) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{rt: &fakeRuntime{}, rtPath: filepath.Join(dir, "runtime.sock"), path: filepath.Join(dir, "shim.sock")}
	e.rtStop = startRuntime(t, e.rt, e.rtPath)
	eng, err := policy.New(testNode)
	if err != nil {
		t.Fatal(err)
	}
	if host == nil {
		host = hostSnap([]string{"192.0.2.53"}, []string{"corp.example"}, []string{"timeout:2"})
	}
	opts = append([]Option{WithLogger(testkit.Logger(t))}, opts...)
	e.shim, err = New("unix://"+e.rtPath, eng, host, opts...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(e.path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.shim.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	e.conn = dial(t, e.path)
	e.runtime = runtimeapi.NewRuntimeServiceClient(e.conn)
	e.images = runtimeapi.NewImageServiceClient(e.conn)
	e.direct = runtimeapi.NewRuntimeServiceClient(dial(t, e.rtPath))
	return e
}

func dial(t testing.TB, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
