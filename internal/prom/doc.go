// Package prom builds one component's Prometheus metrics, each named
// dnsconfigurer_<subsystem>_<name>, and registers them together.
package prom
