package forward

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// Selection policies (Config.Policy), as CoreDNS's forward plugin.
const (
	// PolicyRandom tries the healthy upstreams in a random order.
	PolicyRandom = "random"
	// PolicyRoundRobin tries them from a start that moves by one per query.
	PolicyRoundRobin = "round_robin"
	// PolicySequential tries them in the configured order.
	PolicySequential = "sequential"
)

// Defaults of Config: a forward route's defaults in the
// ServerConfiguration (api/v1alpha1).
var (
	// DefaultTimeout bounds one Exchange, every upstream and the TCP retry
	// included.
	DefaultTimeout = v1alpha1.DefaultTimeout.Duration()
	// DefaultHealthCheck is the interval of the probes of down upstreams
	// and of the upstream list's checks.
	DefaultHealthCheck = v1alpha1.DefaultHealthCheck.Duration()
	// DefaultExpire is how long an idle pooled connection is kept.
	DefaultExpire = v1alpha1.DefaultExpire.Duration()
)

// Defaults of Config.
const (
	// DefaultMaxFails is how many failed exchanges in a row mark an
	// upstream down.
	DefaultMaxFails = v1alpha1.DefaultMaxFails
	// DefaultMaxConcurrent is how many forwarded queries may wait for an
	// upstream at once (the queries coalesced onto another included).
	DefaultMaxConcurrent = v1alpha1.DefaultMaxConcurrent
	// DefaultLoopOptionCode is the EDNS0 local option that carries the loop
	// markers: 65534, the top of the local range (RFC 6891), away from the
	// autopath option's default 65001.
	DefaultLoopOptionCode = 65534
	// MaxHops is how many loop markers a query may carry, its own aside:
	// a query that went through more forwarders of ours is a loop too.
	MaxHops = 8
	// maxIdle is how many idle connections are pooled per upstream and
	// transport; more are closed when released.
	maxIdle = 256
	// probeTimeout bounds one health or loop probe.
	probeTimeout = time.Second
)

// Config configures a Forwarder. The zero value of a field means its
// default.
type Config struct {
	// Upstreams gives the current upstream servers, "ip", "ip:port" or
	// "[ip]:port" (port 53 by default), or one of these after TLSPrefix
	// for DNS over TLS (port 853 by default), read at every query; entries
	// that do not parse are skipped (ParseUpstream). Required.
	Upstreams UpstreamSource
	// Self are the server's own listen addresses ("ip:port", or ":port" for
	// every address), never forwarded to: the same address and port, or a
	// loopback upstream on the port of an unspecified listen address. A
	// loopback neighbour (127.0.0.53 beside 127.0.0.1) is another server.
	Self []string
	// Timeout bounds one Exchange, every upstream tried and the TCP retry
	// included (default DefaultTimeout).
	Timeout time.Duration
	// Policy orders the healthy upstreams for each query: PolicyRandom
	// (default), PolicyRoundRobin or PolicySequential.
	Policy string
	// MaxFails is how many failed exchanges in a row mark an upstream down
	// (default DefaultMaxFails); NoHealthCheck (-1) turns health checking
	// off: upstreams are never marked down.
	MaxFails int
	// HealthCheck is the interval of the probes (". IN NS") that bring a
	// down upstream back, and of the checks of the upstream list that start
	// loop probes (default DefaultHealthCheck).
	HealthCheck time.Duration
	// Expire is how long an idle pooled connection is kept (default
	// DefaultExpire).
	Expire time.Duration
	// TLS is the client config of the tls:// upstreams: roots (nil: the
	// system's), client certificate, server name ("" verifies the
	// upstream's IP address). LoadTLS reads one from files.
	TLS *tls.Config
	// ForceTCP sends every query over TCP.
	ForceTCP bool
	// PreferUDP sends over UDP first even when the client asked over TCP
	// (TCP still follows a truncated reply). Not with ForceTCP.
	PreferUDP bool
	// Pipeline: TCP queries share a few connections per upstream, many in
	// flight on each, answered out of order; for upstreams known to answer
	// pipelined queries concurrently — this project's cluster DNS. A
	// server that answers one query of a connection at a time (CoreDNS,
	// every miekg/dns server) would make each wait for the one before.
	Pipeline bool
	// MaxConcurrent is how many exchanges may wait for an upstream at once
	// (default DefaultMaxConcurrent), shared per client (Forward's Origin): past
	// it, the oldest exchange of the client holding the most gives its
	// place to a newcomer of another client, or of its own for a domain
	// holding fewer of its exchanges; else the newcomer fails at once.
	// Either way ErrOverloaded (README.md).
	MaxConcurrent int
	// FailFastAllUnhealthy answers at once (ErrAllDown) when every usable
	// upstream is down by its health probes, instead of asking one of them
	// at random (CoreDNS's failfast_all_unhealthy_upstreams). Needs health
	// checks (MaxFails not NoHealthCheck).
	FailFastAllUnhealthy bool
	// ShedRcode is the rcode Rcode gives for ErrOverloaded: SERVFAIL
	// (default) or REFUSED (CoreDNS's max_concurrent answer).
	ShedRcode int
	// LoopOptionCode is the EDNS0 option code of the loop markers, in the
	// local range 65001-65534 (default DefaultLoopOptionCode). Every server
	// of a deployment must use the same code for their markers to be seen.
	LoopOptionCode uint16
	// RelayOptions are the codes of the client's EDNS0 options sent on
	// upstream; every other option of the query is dropped (see the
	// package README, "Options"). Loop markers (LoopOptionCode) are always
	// relayed. node-local relays its autopath option to the cluster DNS;
	// the cluster DNS relays none.
	RelayOptions []uint16
	// Zone labels the metrics (const label zone; default "."), so that
	// several Forwarders register on one registry.
	Zone string
	// Logger gets the warnings (default: discarded).
	Logger *slog.Logger
}

// NoHealthCheck as Config.MaxFails turns health checking off.
const NoHealthCheck = -1

// orDefault sets *v to def when it is 0 and reports a negative one.
func orDefault[T int | time.Duration](bad func(field, format string, args ...any), field string, v *T, def T) {
	switch {
	case *v < 0:
		bad(field, "negative (%v)", *v)
	case *v == 0:
		*v = def
	}
}

// withDefaults validates c and returns it with the defaults filled in.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("forward config: %s: "+format, append([]any{field}, args...)...))
	}
	if c.Upstreams == nil {
		bad("Upstreams", "missing")
	}
	orDefault(bad, "Timeout", &c.Timeout, DefaultTimeout)
	switch c.Policy {
	case "":
		c.Policy = PolicyRandom
	case PolicyRandom, PolicyRoundRobin, PolicySequential:
	default:
		bad("Policy", "%q is none of %q, %q, %q", c.Policy, PolicyRandom, PolicyRoundRobin, PolicySequential)
	}
	switch {
	case c.MaxFails < NoHealthCheck:
		bad("MaxFails", "%d (want NoHealthCheck, 0 for the default, or more)", c.MaxFails)
	case c.MaxFails == 0:
		c.MaxFails = DefaultMaxFails
	case c.MaxFails == NoHealthCheck:
		c.MaxFails = 0
	}
	orDefault(bad, "HealthCheck", &c.HealthCheck, DefaultHealthCheck)
	orDefault(bad, "Expire", &c.Expire, DefaultExpire)
	if c.ForceTCP && c.PreferUDP {
		bad("PreferUDP", "not with ForceTCP")
	}
	orDefault(bad, "MaxConcurrent", &c.MaxConcurrent, DefaultMaxConcurrent)
	if c.FailFastAllUnhealthy && c.MaxFails == 0 {
		bad("FailFastAllUnhealthy", "needs health checks (MaxFails is NoHealthCheck)")
	}
	switch c.ShedRcode {
	case 0:
		c.ShedRcode = dns.RcodeServerFailure
	case dns.RcodeServerFailure, dns.RcodeRefused:
	default:
		bad("ShedRcode", "%d (want SERVFAIL %d or REFUSED %d)", c.ShedRcode, dns.RcodeServerFailure, dns.RcodeRefused)
	}
	switch {
	case c.LoopOptionCode == 0:
		c.LoopOptionCode = DefaultLoopOptionCode
	case c.LoopOptionCode < dns.EDNS0LOCALSTART || c.LoopOptionCode > dns.EDNS0LOCALEND:
		bad("LoopOptionCode", "%d outside the local range %d-%d", c.LoopOptionCode, dns.EDNS0LOCALSTART, dns.EDNS0LOCALEND)
	}
	if c.Zone == "" {
		c.Zone = "."
	}
	if _, ok := dns.IsDomainName(c.Zone); !ok {
		bad("Zone", "%q is not a domain name", c.Zone)
	}
	c.Zone = strings.ToLower(dns.Fqdn(c.Zone))
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, errors.Join(errs...)
}
