// Package prom builds one component's Prometheus metrics, each named
// dnsconfigurer_<subsystem>_<name>, and registers them together.
// CoreDNSNames serves them again under CoreDNS's names, made at scrape
// time.
package prom
