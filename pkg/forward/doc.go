// Package forward is the project's forwarder: it sends the queries a DNS
// handler does not answer itself to upstream servers.
//
// It works within bounded time, memory, sockets and goroutines, and keeps
// forwarding loops from forming. The cluster DNS server (pkg/clusterdns) and
// the node-local stage (pkg/nodelocal) use it through their own Exchanger
// interfaces; a Router sends each zone to its own Forwarder (stub domains).
//
// README.md is the manual: forwarder, options, background work and
// health, loops, metrics.
package forward
