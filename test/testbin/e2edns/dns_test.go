// Package e2edns builds e2e.test with Kubernetes' own sig-network specs
// and nothing else.
//
// The upstream binary (k8s.io/kubernetes/test/e2e) links every SIG's specs:
// storage, DRA, autoscaling and the rest. test/cluster runs only the DNS
// specs, so build.sh compiles this package instead. The specs, the
// framework and the suite set-up (RunE2ETests) are upstream's, at the
// release test/testbin pins; only the list of spec packages is shorter.
// The flags are the upstream binary's.
package e2edns

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2emanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	"k8s.io/kubernetes/test/fixtures"

	// The spec source: sig-network, DNS among it.
	_ "k8s.io/kubernetes/test/e2e/network"

	// The framework's own set-up, as upstream's binary has it.
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

func TestMain(m *testing.M) {
	showVersion := flag.Bool("version", false, "print the Kubernetes version the specs come from and exit")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "e2e.test: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	testfiles.AddFileSource(e2emanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(fixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
