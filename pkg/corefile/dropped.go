package corefile

// keepCoreDNS is the workaround for a plugin that serves names of its own:
// CoreDNS keeps serving them, and a forward route sends them there.
const keepCoreDNS = "workaround: keep a CoreDNS for these names and forward them to it"

// dropped are the plugins serve has no counterpart for, each with what
// it does and a workaround that fits it. A plugin named in neither this
// table nor handlers gets keepCoreDNS.
var dropped = map[string]string{
	"root":        "it only names the directory file, auto, sign and dnssec read; workaround: none needed here, keep it beside those plugins in the CoreDNS that serves their zones",
	"metadata":    "no request metadata for other plugins (log formats, view expressions); workaround: none needed, serve's plugins read none",
	"geoip":       "no answers by the client's location; workaround: keep a CoreDNS with geoip and view for the names whose answers depend on it, and forward them to it",
	"proxyproto":  "no PROXY protocol on the listeners; workaround: keep the client's address on the way in (a Service with externalTrafficPolicy: Local, or hostNetwork clients)",
	"quic":        "no DNS over QUIC server; workaround: a proxy in front that ends DoQ and sends plain DNS to serve",
	"grpc_server": "no DNS over gRPC server; workaround: a proxy in front that ends gRPC and sends plain DNS to serve",
	"https":       "no DNS over HTTPS server; workaround: a proxy in front that ends DoH and sends plain DNS to serve",
	"https3":      "no DNS over HTTP/3 server; workaround: a proxy in front that ends DoH3 and sends plain DNS to serve",
	"timeouts":    "the read, write and idle timeouts of the TCP and TLS listeners are serve's own; workaround: none needed for plain DNS",
	"multisocket": "no such setting by name; workaround: udpSockets, the number of UDP sockets serve opens (GOMAXPROCS by default)",
	"nsid":        "no NSID in replies (which server answered); workaround: logQueries and the metrics name the pod that answered",
	"bufsize":     "the EDNS buffer size is serve's own (replies of at most 1232 bytes over UDP, as bufsize's default); workaround: none needed",
	"trace":       "no OpenTracing or Zipkin spans; workaround: logQueries and the metrics (coreDNSMetrics keeps CoreDNS's) for each query's name, rcode and duration",
	"pprof":       "no pprof endpoint; workaround: none in serve, profile a test instance with the Go tools",
	"shed":        "no load shedding; workaround: the pod's resource limits, and limits:, which bound serve's caches and queries in flight",
	"dnstap":      "no dnstap stream; workaround: logQueries (the log plugin) logs every query with its client, name, type, rcode and duration; a dnstap collector needs a CoreDNS in front",
	"local":       "localhost and the loopback reverse names are not answered locally; workaround: overrides for localhost (127.0.0.1, ::1); their reverse names are forwarded",
	"dns64":       "no DNS64 synthesis of AAAA records; workaround: forward to the NAT64 gateway's DNS64 resolver",
	"siit":        "no SIIT address translation in answers; workaround: forward to the translator's DNS64 resolver",
	"chaos":       "no CH-class version.bind or authors.bind answers (REFUSED); workaround: none needed for Kubernetes DNS",
	"tsig":        "no TSIG signing or checking; workaround: a NetworkPolicy on the DNS pods keeps unknown clients out",
	"acl":         "no allow or block lists by client; workaround: a NetworkPolicy on the DNS pods for the clients to keep out (serve has no allow list of its own)",
	"header":      "no rewriting of header bits (ra, aa, rd); workaround: none in serve",
	"dnssec":      "no online DNSSEC signing; workaround: keep a CoreDNS with dnssec for the signed zone and forward it there",
	"minimal":     "the authority and additional sections are not cut; workaround: none needed, clients ignore them",
	"transfer":    "zone transfers are refused: AXFR and IXFR get REFUSED, no NOTIFY is sent; workaround: a secondary that needs the cluster's names reads them from the API server, or from a CoreDNS kept for the transfer",
	"dynupdate":   "no dynamic updates (RFC 2136); workaround: overrides, or a hosts file kept in the ConfigMap",
	"route53":     "no zones read from Route 53; workaround: forward the zone to the VPC's resolver (the VPC CIDR base +2), which answers its private hosted zones",
	"azure":       "no zones read from Azure DNS; workaround: forward the zone to Azure's resolver 168.63.129.16, which answers its private zones",
	"clouddns":    "no zones read from Cloud DNS; workaround: forward the zone to the metadata server's resolver 169.254.169.254, which answers its private zones",
	"grpc":        "no forwarding over gRPC; workaround: forward to the plain DNS address of the server it reaches",
	"erratic":     "a testing plugin (drops and delays replies); workaround: none needed",
	"on":          "no commands run on the server's events; workaround: the pod's lifecycle hooks (postStart, preStop)",
	"view":        "no views by client; workaround: one serve per view, each behind its own Service for those clients",
}

// droppedReason is what a plugin without a conversion gets.
func droppedReason(plugin string) string {
	if r, ok := dropped[plugin]; ok {
		return r
	}
	return "no such feature in dnsconfigurer serve; " + keepCoreDNS
}
