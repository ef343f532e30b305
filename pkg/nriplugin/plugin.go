package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// Limits is what the plugin does with a pod over kubelet's DNS limits.
type Limits string

// Limits modes.
const (
	LimitsTrim   Limits = "trim"
	LimitsReject Limits = "reject"
)

// Defaults of the plugin's identity and socket.
const (
	DefaultSocket = v1alpha1.DefaultNRISocket
	DefaultName   = v1alpha1.DefaultNRIPluginName
	DefaultIndex  = v1alpha1.DefaultNRIPluginIndex
)

// HostConfig is the node resolver config the plugin reads for every
// container: the last-good snapshot of a hostresolv.Watcher.
type HostConfig interface {
	Current() hostresolv.Snapshot
}

// Plugin is the NRI plugin. Build it with New and call Run.
type Plugin struct {
	eng      *policy.Engine
	host     HostConfig
	stateDir string

	log           *slog.Logger
	pods          podfacts.SandboxLookup
	lookupTimeout time.Duration
	limits        Limits
	socket        string
	name, index   string
	minBackoff    time.Duration
	maxBackoff    time.Duration

	reg     prometheus.Registerer
	m       *metrics
	events  podfacts.EventSink
	maxPods int

	mu        sync.Mutex          // serialises state dir changes and the maps below
	running   map[string]podFacts // uid → facts of pods whose file derives from the node file
	sandboxes map[string]string   // sandbox id → uid, of sandboxes that may bind their pod's file
	untracked bool                // a sandbox is missing from sandboxes: keep directories until Synchronize
	connected atomic.Bool
}

// The stub finds the handlers by these interfaces.
var (
	_ stub.ConfigureInterface       = (*Plugin)(nil)
	_ stub.SynchronizeInterface     = (*Plugin)(nil)
	_ stub.RunPodInterface          = (*Plugin)(nil)
	_ stub.RemovePodInterface       = (*Plugin)(nil)
	_ stub.CreateContainerInterface = (*Plugin)(nil)
)

// Option tunes a Plugin.
type Option func(*Plugin)

// WithLogger logs through l (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(p *Plugin) { p.log = l } }

// WithPodLookup takes pod facts from the API server through l, waiting at
// most timeout for a pod it has not seen yet.
func WithPodLookup(l podfacts.SandboxLookup, timeout time.Duration) Option {
	return func(p *Plugin) { p.pods, p.lookupTimeout = l, timeout }
}

// WithRegistry registers the plugin's metrics on reg (default none).
func WithRegistry(reg prometheus.Registerer) Option { return func(p *Plugin) { p.reg = reg } }

// WithEvents posts the DNSConfigForming Warning Events of trimmed and
// rejected pods to e (default none; it needs an API server).
func WithEvents(e podfacts.EventSink) Option { return func(p *Plugin) { p.events = e } }

// WithMaxPods bounds how many running pods the plugin remembers for live
// updates (default DefaultMaxPods).
func WithMaxPods(n int) Option { return func(p *Plugin) { p.maxPods = n } }

// DefaultMaxPods is the default bound of the live-update map: well above
// kubelet's maxPods (110 by default).
const DefaultMaxPods = 4096

// WithLimits sets the limits mode (default LimitsTrim).
func WithLimits(l Limits) Option { return func(p *Plugin) { p.limits = l } }

// WithSocket is the runtime's NRI socket (default DefaultSocket).
func WithSocket(path string) Option { return func(p *Plugin) { p.socket = path } }

// WithIdentity is the plugin's name and two-digit index (default
// DefaultName, DefaultIndex); it registers as "<index>-<name>".
func WithIdentity(name, index string) Option {
	return func(p *Plugin) { p.name, p.index = name, index }
}

// WithBackoff bounds the wait between two connection attempts (default
// 250ms doubling up to 10s).
func WithBackoff(minWait, maxWait time.Duration) Option {
	return func(p *Plugin) { p.minBackoff, p.maxBackoff = minWait, maxWait }
}

// New returns a plugin computing pods' configs with eng and host, writing
// them under stateDir (an absolute path).
func New(eng *policy.Engine, host HostConfig, stateDir string, opts ...Option) (*Plugin, error) {
	p := &Plugin{eng: eng, host: host, stateDir: stateDir, log: slog.Default(), limits: LimitsTrim,
		socket: DefaultSocket, name: DefaultName, index: DefaultIndex,
		minBackoff: 250 * time.Millisecond, maxBackoff: 10 * time.Second, maxPods: DefaultMaxPods,
		running: map[string]podFacts{}, sandboxes: map[string]string{}}
	for _, o := range opts {
		o(p)
	}
	switch {
	case eng == nil || host == nil:
		return nil, errors.New("nriplugin: engine and host config are required")
	case !strings.HasPrefix(stateDir, "/"):
		return nil, fmt.Errorf("nriplugin: state dir %q: must be an absolute path", stateDir)
	case p.limits != LimitsTrim && p.limits != LimitsReject:
		return nil, fmt.Errorf("nriplugin: limits %q: must be %q or %q", p.limits, LimitsTrim, LimitsReject)
	case p.minBackoff <= 0 || p.maxBackoff < p.minBackoff:
		return nil, fmt.Errorf("nriplugin: backoff %s..%s: want 0 < min <= max", p.minBackoff, p.maxBackoff)
	case p.maxPods < 0:
		return nil, fmt.Errorf("nriplugin: max pods %d: must not be negative", p.maxPods)
	}
	if err := api.CheckPluginName(p.name); err != nil {
		return nil, fmt.Errorf("nriplugin: %w", err)
	}
	if err := api.CheckPluginIndex(p.index); err != nil {
		return nil, fmt.Errorf("nriplugin: %w", err)
	}
	m, err := newMetrics(p.reg)
	if err != nil {
		return nil, fmt.Errorf("nriplugin: metrics: %w", err)
	}
	p.m = m
	p.log = p.log.With("component", "nri")
	return p, nil
}

// Connected reports a registered connection to the runtime.
func (p *Plugin) Connected() bool { return p.connected.Load() }

// Configure subscribes to CreateContainer, RemovePodSandbox and (always
// delivered) Synchronize, plus RunPodSandbox with an API server in limits
// mode reject: without one there is nothing to decide before a container.
func (p *Plugin) Configure(ctx context.Context, _, runtime, version string) (api.EventMask, error) {
	events := []string{"CreateContainer", "RemovePodSandbox"}
	if p.limits == LimitsReject && p.pods != nil {
		events = append(events, "RunPodSandbox")
	}
	p.log.Info("connected to the runtime", "runtime", runtime, "version", version, "events", strings.Join(events, ","))
	return api.MustParseEventMask(events...), nil
}

// Synchronize, at every (re)connection, removes the state directories of
// pods the runtime no longer has, counts the runtime's sandboxes as the
// users of their pod's file, follows again the pods whose records a
// previous run left, and brings their files up to date.
func (p *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	removed, err := p.prune(pods)
	recovered := p.recoverRecords(pods)
	followed := len(p.running)
	p.mu.Unlock()
	if err != nil {
		p.m.errors.WithLabelValues(stagePrune).Inc()
		p.log.Error("cleaning the state dir", "dir", p.stateDir, "error", err)
	}
	p.log.Info("synchronized", "pods", len(pods), "stale_removed", removed, "recovered", recovered, "followed", followed)
	p.update()
	return nil, nil
}

// RunPodSandbox rejects, in limits mode reject, a pod the API server knows
// whose DNS config exceeds the limits. The sandbox's own file is not
// visible here, so a pod known only from it is checked at its first
// container.
func (p *Plugin) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	if p.limits != LimitsReject || p.pods == nil {
		return nil
	}
	in, ok := p.lookup(ctx, pod)
	if !ok {
		return nil
	}
	res, err := p.eng.Compute(in, podfacts.HostOf(p.host.Current()))
	if err != nil {
		return nil // the container fails open at CreateContainer, with a log line
	}
	if err := p.checkLimits(pod, res); err != nil {
		p.postLimits(pod, res)
		return err
	}
	return nil
}

// RemovePodSandbox removes the pod's state directory, unless another
// sandbox of the pod (kubelet recreates a sandbox whose pause container or
// network died, then removes the old one) may still bind its file.
func (p *Plugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	removed, err := p.removeSandbox(pod.GetId(), pod.GetUid())
	switch {
	case err != nil:
		p.m.errors.WithLabelValues(stageRemove).Inc()
		p.log.Error("removing the pod's state", "pod", podName(pod), "uid", pod.GetUid(), "sandbox", pod.GetId(), "error", err)
	case !removed:
		p.log.Debug("pod state kept: another sandbox of the pod may use it", "pod", podName(pod), "uid", pod.GetUid(), "sandbox", pod.GetId())
	}
	return nil
}

// CreateContainer replaces the container's /etc/resolv.conf with the pod's
// file. Internal errors leave the container unchanged (logged); only limits
// mode reject fails it.
func (p *Plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	start := time.Now()
	defer func() { p.m.adjustSeconds.Observe(time.Since(start).Seconds()) }()
	log := p.log.With("pod", podName(pod), "uid", pod.GetUid(), "container", ctr.GetName())
	adj, err := p.adjust(ctx, pod, ctr, log)
	var rejected *rejectError
	var failed *stageError
	switch {
	case errors.As(err, &rejected):
		p.m.containers.WithLabelValues(resultRejected).Inc()
		log.Warn("container rejected: DNS limits exceeded", "error", err)
		return nil, nil, err
	case err != nil:
		stage := stageCompute
		if errors.As(err, &failed) {
			stage = failed.stage
		}
		p.m.errors.WithLabelValues(stage).Inc()
		p.m.containers.WithLabelValues(resultUnchanged).Inc()
		log.Error("cannot compute the pod's DNS; container created with kubelet's resolv.conf", "stage", stage, "error", err)
		return nil, nil, nil
	case adj == nil:
		p.m.containers.WithLabelValues(resultUnchanged).Inc()
	default:
		p.m.containers.WithLabelValues(resultAdjusted).Inc()
	}
	return adj, nil, nil
}

// stageError is an internal error and the stage (a metric label) it
// happened at.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// stageErr wraps err, if any, with its stage.
func stageErr(stage string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{stage, err}
}

// computeErr is the stage error of an engine error for pod.
func computeErr(pod *api.PodSandbox, err error) error {
	stage := stageCompute
	if errors.Is(err, policy.ErrHostConfig) {
		stage = stageHostConfig
	}
	return &stageError{stage, fmt.Errorf("pod %q (uid %s): %w", podName(pod), pod.GetUid(), err)}
}

// adjust is CreateContainer's work: nil, nil for a container to leave as
// it is.
func (p *Plugin) adjust(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, log *slog.Logger) (*api.ContainerAdjustment, error) {
	orig := sandboxResolvConf(pod, ctr)
	if orig == "" {
		log.Debug("no sandbox /etc/resolv.conf mount; container left unchanged")
		return nil, nil
	}
	uid := pod.GetUid()
	if err := validUID(uid); err != nil {
		return nil, stageErr(stageFacts, err)
	}
	in, source, err := p.facts(ctx, pod, orig, podfacts.HostOf(p.host.Current()))
	if err != nil {
		return nil, stageErr(stageFacts, err)
	}
	// The node file is read again, with the file written, under the state
	// lock: a live update (which holds it) then never runs between the two,
	// and whichever writes last writes the latest node config.
	p.mu.Lock()
	defer p.mu.Unlock()
	res, err := p.eng.Compute(in, podfacts.HostOf(p.host.Current()))
	if err != nil {
		return nil, computeErr(pod, err)
	}
	if err := p.checkLimits(pod, res); err != nil {
		p.postLimits(pod, res)
		return nil, err
	}
	for _, w := range res.Warnings {
		level := slog.LevelInfo
		if w.Limit != "" {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "pod DNS warning", "reason", w.Reason, "message", w.Message)
	}
	p.postLimits(pod, res)
	// The record goes first: a pod file that is there is followed.
	follow := p.follows(uid, res, log)
	dir, err := p.podDir(uid)
	if err == nil {
		err = saveRecord(dir, pod, in, follow)
	}
	if err != nil {
		return nil, stageErr(stageWrite, err)
	}
	path, _, err := p.writePod(uid, content(pod, res))
	if err != nil {
		return nil, stageErr(stageWrite, err)
	}
	p.track(pod.GetId(), uid)
	p.remember(pod, in, follow)
	log.Debug("container resolv.conf replaced", "source", source, "type", string(res.Type), "file", path)
	adj := &api.ContainerAdjustment{}
	adj.AddMount(resolvMount(path))
	return adj, nil
}

// postLimits posts a DNSConfigForming Warning Event for each limit res
// exceeds (trimmed, or in limits mode reject the reason the pod fails),
// when there is an event sink.
func (p *Plugin) postLimits(pod *api.PodSandbox, res policy.Result) {
	if p.events == nil {
		return
	}
	ref := sandboxOf(pod).Ref()
	for _, w := range podfacts.OverLimits(res.Warnings) {
		p.events.Warning(ref, w.Reason, w.Message)
	}
}

// rejectError is a pod over the limits in limits mode reject.
type rejectError struct{ msg string }

func (e *rejectError) Error() string { return e.msg }

// checkLimits is a *rejectError for res over the limits in limits mode
// reject.
func (p *Plugin) checkLimits(pod *api.PodSandbox, res policy.Result) error {
	over := podfacts.OverLimits(res.Warnings)
	if p.limits != LimitsReject || len(over) == 0 {
		return nil
	}
	return &rejectError{podfacts.RejectMessage(pod.GetNamespace(), pod.GetName(), pod.GetUid(), over)}
}

// resolvPath is where containers see the resolver config.
const resolvPath = "/etc/resolv.conf"

// resolvMount is the read-only bind of the pod's file. No propagation
// option: rshared or rslave would change the rootfs propagation.
func resolvMount(path string) *api.Mount {
	return &api.Mount{Destination: resolvPath, Type: "bind", Source: path,
		Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}}
}

// content is the pod's file: a header naming its origin, then the config
// as containerd formats a sandbox resolv.conf.
func content(pod *api.PodSandbox, res policy.Result) []byte {
	return []byte(Header(pod.GetNamespace(), pod.GetName()) + formatConfig(res))
}

// Header is the comment line heading each file the plugin writes. Control
// characters and invalid UTF-8 in the names (which the runtime would not
// send) become spaces and U+FFFD: the line stays one line of text.
func Header(namespace, name string) string {
	text := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, namespace+"/"+name)
	return "# Generated by dnsconfigurer (NRI) for pod " + text + "; do not edit.\n"
}

func podName(pod *api.PodSandbox) string { return pod.GetNamespace() + "/" + pod.GetName() }
