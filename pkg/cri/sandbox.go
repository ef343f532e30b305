package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// Sources of a pod's facts, as the metric and log label them.
const (
	sourceAPIServer = "apiserver"
	sourceSandbox   = "sandbox"
	sourceNone      = "none"
)

// rewrite returns the request to forward: req with its DNS config (and
// hostname) replaced (changed is set), or req unchanged when the shim has
// nothing to do or fails open. A non-nil error is the status RunPodSandbox
// fails with.
func (s *Server) rewrite(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (fwd *runtimeapi.RunPodSandboxRequest, changed bool, err error) {
	source := sourceNone
	defer func() {
		if r := recover(); r != nil {
			changed = false
			fwd, err = s.failed(req, source, "panic", fmt.Errorf("panic: %v", r))
		}
	}()
	cfg := req.GetConfig()
	name, namespace, uid, err := podIdentity(cfg)
	if err != nil {
		return s.failedNoChange(req, source, "bad_request", err)
	}
	sb := SandboxOf(cfg)
	log := s.log.With("pod", namespace+"/"+name, "uid", uid)
	host := podfacts.HostOf(s.host.Current())

	var in policy.Input
	found := false
	if s.pods != nil {
		pod := sb.Pod()
		wait := pod.LookupWait(s.lookupTimeout)
		lctx, cancel := context.WithTimeout(ctx, wait)
		in, found = s.lookupPod(lctx, pod)
		cancel()
		if found {
			s.m.lookups.WithLabelValues("hit").Inc()
			source = sourceAPIServer
		} else {
			s.m.lookups.WithLabelValues("miss").Inc()
			log.Warn("pod not in the API server cache; using the sandbox config", "waited", wait.String())
		}
	}
	if !found {
		in, err = podfacts.FromSandbox(sb, s.eng, host)
		if errors.Is(err, podfacts.ErrNoDNSConfig) {
			s.m.sandboxes.WithLabelValues(sourceNone, "skipped").Inc()
			log.Debug("sandbox config has no dns_config (not from kubelet); forwarded unchanged")
			return req, false, nil
		}
		if err != nil {
			return s.failedNoChange(req, source, "bad_request", err)
		}
		source = sourceSandbox
	}
	log = log.With("source", source)

	res, err := s.eng.Compute(in, host)
	if err != nil {
		reason := "compute"
		if errors.Is(err, policy.ErrHostConfig) {
			reason = "host_config"
		}
		return s.failedNoChange(req, source, reason, fmt.Errorf("pod %q (uid %s): %w", namespace+"/"+name, uid, err))
	}

	over := podfacts.OverLimits(res.Warnings)
	if len(over) > 0 && s.limits == LimitsReject {
		for _, w := range over {
			s.m.limits.WithLabelValues(w.Limit, "rejected").Inc()
		}
		s.m.sandboxes.WithLabelValues(source, "rejected").Inc()
		msg := podfacts.RejectMessage(namespace, name, uid, over)
		log.Warn("sandbox rejected: DNS limits exceeded", "error", msg)
		return nil, false, status.Error(codes.InvalidArgument, msg)
	}
	for _, w := range res.Warnings {
		level := slog.LevelInfo
		if w.Limit != "" {
			level = slog.LevelWarn
			s.m.limits.WithLabelValues(w.Limit, "trimmed").Inc()
			if s.events != nil {
				s.events.Warning(sb.Ref(), w.Reason, w.Message)
			}
		}
		log.Log(ctx, level, "pod DNS warning", "reason", w.Reason, "message", w.Message)
	}

	dns := &runtimeapi.DNSConfig{Servers: res.Nameservers, Searches: res.Searches, Options: res.Options}
	hostname := cfg.GetHostname()
	if source == sourceAPIServer && !sb.HostNetwork && res.Hostname != "" {
		hostname = res.Hostname
	}
	if sameDNS(cfg.GetDnsConfig(), dns) && hostname == cfg.GetHostname() {
		s.m.sandboxes.WithLabelValues(source, "unchanged").Inc()
		log.Debug("sandbox DNS unchanged", "type", string(res.Type))
		return req, false, nil
	}
	log.Info("sandbox DNS rewritten", "type", string(res.Type),
		"nameservers", strings.Join(res.Nameservers, " "), "searches", strings.Join(res.Searches, " "),
		"options", strings.Join(res.Options, " "), "hostname", hostname)
	cfg.DnsConfig = dns
	cfg.Hostname = hostname
	s.m.sandboxes.WithLabelValues(source, "rewritten").Inc()
	return req, true, nil
}

// failedNoChange is failed for rewrite's results.
func (s *Server) failedNoChange(req *runtimeapi.RunPodSandboxRequest, source, reason string, err error) (*runtimeapi.RunPodSandboxRequest, bool, error) {
	fwd, err := s.failed(req, source, reason, err)
	return fwd, false, err
}

// failed applies the failure policy to an internal error.
func (s *Server) failed(req *runtimeapi.RunPodSandboxRequest, source, reason string, err error) (*runtimeapi.RunPodSandboxRequest, error) {
	s.m.rewriteErrors.WithLabelValues(reason).Inc()
	if s.failure == FailClosed {
		s.m.sandboxes.WithLabelValues(source, "failed_closed").Inc()
		s.log.Error("cannot compute sandbox DNS; failing the sandbox (failure policy closed)", "reason", reason, "error", err)
		code := codes.Internal
		var bad *badRequestError
		switch {
		case errors.As(err, &bad):
			code = codes.InvalidArgument
		case errors.Is(err, policy.ErrHostConfig):
			code = codes.FailedPrecondition
		}
		return nil, status.Errorf(code, "dnsconfigurer: cannot compute the sandbox DNS config (failure policy closed): %v", err)
	}
	s.m.sandboxes.WithLabelValues(source, "failed_open").Inc()
	s.log.Error("cannot compute sandbox DNS; forwarding kubelet's request unchanged (failure policy open)", "reason", reason, "error", err)
	return req, nil
}

func sameDNS(a, b *runtimeapi.DNSConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equal(a.Servers, b.Servers) && equal(a.Searches, b.Searches) && policy.SameOptions(a.Options, b.Options)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// lookupPod asks the PodLookup for sb's pod, through PodFor when it has
// it. A pod that another PodLookup returns whose namespace or name is not
// the sandbox's is refused.
func (s *Server) lookupPod(ctx context.Context, sb podfacts.SandboxPod) (policy.Input, bool) {
	if l, ok := s.pods.(podfacts.SandboxLookup); ok {
		return l.PodFor(ctx, sb)
	}
	in, ok := s.pods.Pod(ctx, sb.UID)
	if ok && (in.Namespace != sb.Namespace || in.Name != sb.Name) {
		s.log.Warn("pod lookup returned another pod; using the sandbox config",
			"pod", sb.Namespace+"/"+sb.Name, "uid", sb.UID, "got", in.Namespace+"/"+in.Name)
		return policy.Input{}, false
	}
	return in, ok
}
