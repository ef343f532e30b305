// Package lintcorpus runs `dnsconfigurer validate` over the rendered output
// of real public Helm charts, as a CI job pipes `helm template` into it.
// Each testdata directory holds one chart's output and a SOURCE note (chart,
// version, repository, commit, the helm command). The test lists every
// finding it accepts, and why: any other finding is a false positive.
//
//	go test ./test/lintcorpus/
package lintcorpus
