// Package apiserver runs a real etcd and kube-apiserver on 127.0.0.1 for
// integration tests.
//
// The binaries are not part of the repository. test/testbin/build.sh builds
// them from a pinned Kubernetes release into a cache directory keyed by the
// sha256 of test/testbin/go.sum, and this package looks there, or in the
// directory named by $DNSCONFIGURER_TESTBIN. When they are absent, tests that
// need them skip with a message naming build.sh; CI always builds them.
//
// A control plane takes several seconds to start, so a test package starts
// one in TestMain and shares it, giving each test its own namespace:
//
//	var controlPlane *apiserver.ControlPlane
//
//	func TestMain(m *testing.M) {
//		os.Exit(apiserver.RunTests(m, &controlPlane))
//	}
//
//	func TestSomething(t *testing.T) {
//		cp := apiserver.Require(t, controlPlane)
//		ns := cp.Namespace(t)
//		client := cp.Client()
//		...
//	}
//
// The control plane has no controllers: nothing creates EndpointSlices,
// assigns pod IPs, creates service account tokens or finalizes namespaces.
// Tests write EndpointSlices themselves and set status.podIP through the
// status subresource. Authentication is by static bearer tokens (an admin in
// system:masters plus any users given with WithUser), authorization is
// Node,RBAC, and the ServiceAccount admission plugin is off so pods need no
// service account. The Service cluster IP range is 10.96.0.0/16 (ServiceCIDR,
// 65,534 cluster IPs); a later --service-cluster-ip-range in
// WithAPIServerArgs replaces it, up to the /12 kube-apiserver accepts, as
// test/bench's TestChurn does for larger clusters.
//
// The kube-apiserver can be stopped and started again on the same port while
// etcd and its data stay up (StopAPIServer, StartAPIServer, RestartAPIServer),
// for tests of clients that must ride out an API server outage.
//
// Everything listens on 127.0.0.1 only. Child processes run in their own
// process group and are killed when the test binary dies (Linux). Close
// removes the temporary directory; one left behind by a test binary that
// died (a panic, a go test -timeout) is removed by the next Start.
//
// This package is test support: only _test.go files and other test helpers
// may import it.
package apiserver
