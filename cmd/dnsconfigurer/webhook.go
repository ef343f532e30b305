package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/internal/logflags"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/webhook"
)

// webhookConfig is the config of `dnsconfigurer webhook`.
type webhookConfig = v1alpha1.WebhookConfiguration

// webhookFlags are the flags of `dnsconfigurer webhook`: the config file,
// the fields each flag set on the command line replaces, and logging.
type webhookFlags struct {
	config string
	layer  *flaglayer.Layer[webhookConfig]
	log    logFlags
}

func (f *webhookFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "WebhookConfiguration file (YAML or JSON, apiVersion "+v1alpha1.GroupVersion+")")
	l := flaglayer.New[webhookConfig](fs)
	l.String(func(c *webhookConfig) *string { return &c.Listen }, "listen", v1alpha1.DefaultWebhookListen, "HTTPS listen address (config: listen)")
	l.String(func(c *webhookConfig) *string { return &c.TLSCertFile }, "tls-cert-file", "", "serving certificate, PEM, re-read on change (config: tlsCertFile)")
	l.String(func(c *webhookConfig) *string { return &c.TLSPrivateKeyFile }, "tls-private-key-file", "", "serving private key, PEM, re-read on change (config: tlsPrivateKeyFile)")
	l.StringPtr(func(c *webhookConfig) **string { return &c.Cluster.ClusterDomain }, "cluster-domain", v1alpha1.DefaultClusterDomain, "kubelet clusterDomain (\"\" for none; config: cluster.clusterDomain)")
	l.List(func(c *webhookConfig) *[]string { return &c.Cluster.ClusterDNS }, "cluster-dns", "", "kubelet clusterDNS: comma-separated IPs (config: cluster.clusterDNS)")
	l.String(func(c *webhookConfig) *string { return &c.Trims }, "trims", v1alpha1.DefaultTrims, "what kubelet would only trim: warn or deny (config: trims)")
	l.String(func(c *webhookConfig) *string { return &c.Workloads }, "workloads", v1alpha1.DefaultWorkloads, "the pod templates of Deployments and other workloads: check or skip (config: workloads)")
	f.layer = l
	f.log.register(fs, logJSON)
}

// webhookConfig is the config of the file, if any, and the flags set on
// fs, the set f was registered on.
func (f *webhookFlags) webhookConfig(*flag.FlagSet) (*webhookConfig, error) {
	cfg := &webhookConfig{}
	if err := f.layer.Load(f.config, v1alpha1.WebhookKind, cfg); err != nil {
		return nil, err
	}
	if cfg.CheckComplete() != nil {
		return nil, errors.New("--tls-cert-file and --tls-private-key-file (or tlsCertFile and tlsPrivateKeyFile) are required: the webhook serves HTTPS only")
	}
	return cfg, nil
}

func runWebhook(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	cfg, logf, err := parseWebhookFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitCode(stderr, "webhook", usageError{err})
	}
	reviewer, warnings, err := webhook.NewReviewer(cfg)
	if err != nil {
		return exitCode(stderr, "webhook", usageError{err})
	}
	log, err := logf.logger(stderr)
	if err != nil {
		return exitCode(stderr, "webhook", err)
	}
	logflags.Start(log, "webhook")
	for _, w := range warnings {
		log.Warn("node settings", "reason", w.Reason, "msg", w.Message)
	}
	if len(cfg.Cluster.ClusterDNS) == 0 {
		log.Warn("no cluster DNS configured: ClusterFirst pods are checked as kubelet without clusterDNS treats them (as Default)")
	}
	if err := serveWebhook(ctx, cfg, reviewer, log); err != nil {
		log.Error("stopped", "err", err)
		return exitFail
	}
	return exitOK
}

// parseWebhookFlags parses the command line into the webhook's config and
// its logging flags.
func parseWebhookFlags(args []string, stderr io.Writer) (*webhookConfig, logFlags, error) {
	fs := newFlagSet("webhook", stderr, "usage: dnsconfigurer webhook --tls-cert-file F --tls-private-key-file F [--config F] [--listen ADDR] [--cluster-domain D] [--cluster-dns IP[,IP]] [--trims warn|deny]\n"+
		"    [--workloads check|skip] [--log-format json|text] [--log-level debug|info|warn|error]\n"+
		"\nServes POST /validate (admission.k8s.io/v1 AdmissionReview for Pod CREATE and workload CREATE/UPDATE), GET /healthz, /readyz and /metrics over HTTPS.\n"+
		"Flags given on the command line replace the config file's fields.")
	var f webhookFlags
	f.register(fs)
	if err := parseDaemonFlags(fs, args, &f.log); err != nil {
		return nil, f.log, err
	}
	cfg, err := f.webhookConfig(fs)
	return cfg, f.log, err
}

// serveWebhook serves the webhook until ctx is done.
func serveWebhook(ctx context.Context, cfg *webhookConfig, reviewer *webhook.Reviewer, log *slog.Logger) error {
	reg := newRegistry()
	read, write := cfg.Timeouts()
	srv, err := webhook.New(reviewer, cfg.TLSCertFile, cfg.TLSPrivateKeyFile,
		webhook.WithLogger(log),
		webhook.WithRegistry(reg),
		webhook.WithGatherer(reg),
		webhook.WithMaxRequestBytes(cfg.MaxRequestBytes),
		webhook.WithTimeouts(read, write),
		webhook.WithBodyProgressTimeout(cfg.BodyProgress()),
		webhook.WithClientCAFile(cfg.ClientCAFile),
	)
	if err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	log.Info("starting", "listen", cfg.Listen, "clusterDNS", cfg.Cluster.ClusterDNS, "clusterDomain", cfg.Cluster.Domain(),
		"nodePools", len(cfg.NodePools), "trims", cfg.Trims, "workloads", cfg.Workloads, "maxRequestBytes", strconv.FormatInt(cfg.MaxRequestBytes, 10),
		"clientCertificates", cfg.ClientCAFile != "")
	return srv.ListenAndServe(ctx, cfg.Listen)
}
