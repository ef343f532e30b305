package dnsserver

import (
	"log/slog"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
)

// ClusterZones are the zones of the cluster DNS besides the cluster
// domain: autopath names and reverse lookups. Node-local sends their names
// to the cluster DNS, as node-cache's server blocks do, and both modes
// label their request metrics with them.
var ClusterZones = []string{autopath.Suffix, "in-addr.arpa", "ip6.arpa"}

// NewServer is the listener of cfg, in either mode: its addresses, limits,
// lameduck, SO_REUSEPORT and UDP sockets, and its metric labels. Name is "cluster" or
// "nodelocal". The handler is set with SetHandler (see QueryLogged).
func NewServer(cfg *v1alpha1.ServerConfiguration, log *slog.Logger) *Server {
	srv := &Server{Listen: cfg.ListenAddrs(), Logger: log, Lameduck: cfg.Lameduck.Duration(), ReusePort: cfg.ReusePort,
		UDPSockets:     cfg.UDPSockets,
		MaxUDPInFlight: cfg.Limits.UDPInFlight, MaxTCPConns: cfg.Limits.TCPConnections,
		MaxTCPConnsPerClient: cfg.Limits.TCPConnectionsPerClient,
		TCPIdleTimeout:       cfg.Limits.TCPIdleTimeout.Duration(), TCPWriteTimeout: cfg.Limits.TCPWriteTimeout.Duration(),
		Zones: metricZones(cfg), Name: "cluster"}
	if cfg.Mode == v1alpha1.ModeNodeLocal {
		srv.Name = "nodelocal"
	}
	return srv
}

// metricZones are the zones the request metrics of cfg's listener are
// labelled with: the cluster domain, ClusterZones and, in cluster mode,
// the clusterset zone and the zones of the forward routes (stub domains)
// as the file starts with;
// every other name is ".".
func metricZones(cfg *v1alpha1.ServerConfiguration) []string {
	zones := append([]string{cfg.ClusterDomain}, ClusterZones...)
	if cfg.Mode != v1alpha1.ModeNodeLocal {
		if z := cfg.ClustersetZoneName(); z != "" {
			zones = append(zones, z)
		}
		for _, r := range cfg.Forward {
			zones = append(zones, r.ZoneName())
		}
	}
	return zones
}

// QueryLogged is h, logging every query to log when cfg.LogQueries is set
// (LogQueries).
func QueryLogged(cfg *v1alpha1.ServerConfiguration, h dns.Handler, log *slog.Logger) dns.Handler {
	if cfg.LogQueries {
		return LogQueries(h, log)
	}
	return h
}
