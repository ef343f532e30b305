package nriplugin

import (
	"context"
	"log/slog"

	"github.com/containerd/nri/pkg/api"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// HostSubscriber is a HostConfig that also reports changes (a
// hostresolv.Watcher): with one, Run rewrites the files of running pods
// whose config derives from the node file when it changes.
type HostSubscriber interface {
	HostConfig
	Subscribe() (<-chan hostresolv.Snapshot, func())
}

// podFacts is what a live update recomputes a running pod's file from:
// the engine input remembered at its last CreateContainer.
type podFacts struct {
	pod *api.PodSandbox // namespace, name and uid only
	in  policy.Input
}

// follows reports whether the plugin follows pod uid with the config res
// for live updates: when it derives from the node file (every type but
// none), within the max pods (past it a pod is not followed, logged); p.mu
// must be held.
func (p *Plugin) follows(uid string, res policy.Result, log *slog.Logger) bool {
	if res.Type == policy.TypeNone {
		return false
	}
	if _, ok := p.running[uid]; !ok && len(p.running) >= p.maxPods {
		log.Warn("too many pods to follow; this pod's file will not follow node resolver changes", "max", p.maxPods)
		return false
	}
	return true
}

// remember keeps pod's facts for live updates when follow, forgets them
// otherwise; p.mu must be held.
func (p *Plugin) remember(pod *api.PodSandbox, in policy.Input, follow bool) {
	uid := pod.GetUid()
	if !follow {
		delete(p.running, uid)
		return
	}
	p.running[uid] = podFacts{pod: &api.PodSandbox{Namespace: pod.GetNamespace(), Name: pod.GetName(), Uid: uid}, in: in}
}

// followHost rewrites the running pods' files at each change of the node
// resolver config until ctx is done, when p.host reports changes.
func (p *Plugin) followHost(ctx context.Context) {
	sub, ok := p.host.(HostSubscriber)
	if !ok {
		return
	}
	ch, cancel := sub.Subscribe()
	defer cancel()
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
			p.update()
		case <-ctx.Done():
			return
		}
	}
}

// update recomputes the file of every remembered pod with the current node
// config and rewrites in place those that changed (a bind mount pins the
// inode, so a rename would not reach running containers). It runs at each
// change and at each Synchronize (the node file may have changed while the
// plugin was away). Over the limits
// the trimmed config is written whatever the limits mode: a running pod
// cannot be rejected.
func (p *Plugin) update() {
	p.mu.Lock()
	defer p.mu.Unlock()
	host := podfacts.HostOf(p.host.Current())
	changed := 0
	for uid, f := range p.running {
		log := p.log.With("pod", podName(f.pod), "uid", uid)
		res, err := p.eng.Compute(f.in, host)
		if err != nil {
			p.m.errors.WithLabelValues(stageUpdate).Inc()
			log.Error("live update: cannot compute the pod's DNS; its file is left as it is", "error", err)
			continue
		}
		_, ok, err := p.writePod(uid, content(f.pod, res))
		if err != nil {
			p.m.errors.WithLabelValues(stageUpdate).Inc()
			log.Error("live update: cannot rewrite the pod's file", "error", err)
			continue
		}
		if !ok {
			continue
		}
		changed++
		p.m.updates.Inc()
		for _, w := range podfacts.OverLimits(res.Warnings) {
			log.Warn("live update: pod DNS trimmed", "reason", w.Reason, "message", w.Message)
		}
		p.postLimits(f.pod, res)
		log.Debug("live update: pod file rewritten")
	}
	if changed > 0 {
		p.log.Info("node resolver config changed; running pods' files rewritten", "pods", changed, "followed", len(p.running))
	}
}
