package dnsserver_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves goroutines behind (servers not
// shut down, forwarder exchanges still running).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
