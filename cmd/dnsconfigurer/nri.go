package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// nriConfig is the config of `dnsconfigurer nri`.
type nriConfig = v1alpha1.NRIConfiguration

// nriFlags binds the flags of `dnsconfigurer nri` to its config; with
// --config, each one set on the command line replaces the file's field.
func nriFlags(fs *flag.FlagSet) *flaglayer.Layer[nriConfig] {
	l := flaglayer.New[nriConfig](fs)
	l.String(func(c *nriConfig) *string { return &c.Socket }, "socket", v1alpha1.DefaultNRISocket, "the runtime's NRI socket `PATH`")
	l.String(func(c *nriConfig) *string { return &c.PluginName }, "plugin-name", v1alpha1.DefaultNRIPluginName, "plugin name; it registers as <index>-<name>")
	l.String(func(c *nriConfig) *string { return &c.PluginIndex }, "plugin-index", v1alpha1.DefaultNRIPluginIndex, "plugin index, two digits: the order among the runtime's plugins")
	registerAgentFlags(l, func(c *nriConfig) *v1alpha1.NodeAgent { return &c.NodeAgent }, "trim (as kubelet) or reject (the container fails)")
	l.String(func(c *nriConfig) *string { return &c.StateDir }, "state-dir", v1alpha1.DefaultNRIStateDir, "directory of the pods' resolv.conf files (`DIR`/<pod uid>/resolv.conf)")
	flaglayer.Text(l, func(c *nriConfig) *v1alpha1.Duration { return &c.PodLookupTimeout }, "pod-lookup-timeout", v1alpha1.DefaultNRIPodLookupTimeout.String(),
		"how long a container waits for a pod the informer has not seen (at most 10s: NRI's request timeout is 2s)")
	return l
}

// nriOwn are the arguments of `dnsconfigurer nri` in its usage, before
// those every agent has.
const nriOwn = "--socket /var/run/nri/nri.sock [--plugin-name dnsconfigurer] [--plugin-index 10]\n" +
	"    [--state-dir DIR] [--pod-lookup-timeout 1s]"

// nriCommand is `dnsconfigurer nri`.
var nriCommand = agentCommand[nriConfig]{"nri", v1alpha1.NRIKind, nriOwn, nriFlags, runNRIParts}

// runNRIParts runs the plugin (reconnecting to the runtime), its pod
// informer (with an API server) and its metrics server until ctx is done
// or one of them fails.
func runNRIParts(ctx context.Context, cfg *v1alpha1.NRIConfiguration, log *slog.Logger, reg *prometheus.Registry) error {
	return runAgent(ctx, agentRun{kind: nodesettings.KindNRI, component: podfacts.ComponentNRI, agent: &cfg.NodeAgent,
		part: func(eng *policy.Engine, host *hostresolv.Watcher, kube agentAPI) (agentPart, error) {
			opts := []nriplugin.Option{nriplugin.WithLogger(log), nriplugin.WithSocket(cfg.Socket), nriplugin.WithRegistry(reg),
				nriplugin.WithIdentity(cfg.PluginName, cfg.PluginIndex), nriplugin.WithLimits(nriplugin.Limits(cfg.Limits))}
			if kube.pods != nil {
				opts = append(opts, nriplugin.WithPodLookup(kube.pods, cfg.PodLookupTimeout.Duration()), nriplugin.WithEvents(kube.events))
			}
			plugin, err := nriplugin.New(eng, host, cfg.StateDir, opts...)
			if err != nil {
				return agentPart{}, usageError{err}
			}
			return agentPart{run: plugin.Run, ready: health.Condition(plugin.Connected, "not connected to the runtime's NRI socket")}, nil
		}}, log, reg)
}
