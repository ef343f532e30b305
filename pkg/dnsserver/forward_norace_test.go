//go:build !race

package dnsserver_test

const raceEnabled = false
