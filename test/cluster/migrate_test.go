package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestClusterMigration follows deploy/README.md's "Migrating from CoreDNS
// (and NodeLocal DNSCache)" on a cluster that has what operators have:
// kubeadm's CoreDNS running kubespray's Corefile rendered with its
// documented examples (two server blocks with their own caches, a stub
// domain, regex and suffix rewrites, a hosts file; operatorCorefile) and
// NodeLocal DNSCache in front of it (operatorManifests). Pods resolve all
// the while with glibc's, musl's and Go's resolvers: cluster, stub-zone,
// hosts, rewritten and external names. It converts the Corefile, deploys side by side, takes
// the node over from node-cache (the canary), replaces CoreDNS, then rolls
// everything back, and asserts that no lookup failed and no answer changed
// at any step. It prints one line per step:
//
//	migration: step NAME: lookups N failed M changed K longest-ms L
func TestClusterMigration(t *testing.T) {
	withCluster(t, Options{}, "kubelet Ready through the shim; kubeadm's CoreDNS and a NodeLocal DNSCache stand-in", func(t *testing.T, c *Cluster, st *steps) {
		m := &migration{c: c, outer: t, logs: c.keepDNSLogs(t.Context())}
		if !st.run(t, "operator's cluster", m.setUp) {
			return
		}
		for _, s := range m.steps() {
			ok := st.run(t, s.name, func(t *testing.T) { m.step(t, s) })
			if !ok {
				break
			}
		}
		st.run(t, "lookups", m.check)
	})
}

// migration is the state of TestClusterMigration.
type migration struct {
	c     *Cluster
	outer *testing.T
	// ns holds the resolving pods and the Service "web".
	ns string
	// myDNS is the operator's copy of deploy/examples/take-over-nodelocaldns
	// (deploy/overlays/my-dns of a copy of deploy/), overlay the test
	// overlay around it (WriteOverlayFor).
	myDNS, overlay string
	// want is each looked-up name's addresses; names the names, when
	// not lookupNames.
	want  map[string]string
	names []string

	// logs keeps the DNS components' logs, for failed lookups.
	logs *dnsLogs

	mu      sync.Mutex
	windows []window
}

// window is a step's time span: lookups that ended in it count for it.
type window struct {
	name     string
	from, to time.Time
}

// lookupNames are the names the pods look up; want holds their answers.
var lookupNames = []string{
	"web",                                  // a Service of the pod's namespace, through the search list
	"kubernetes.default",                   // another namespace's Service
	"db.corp.example",                      // the stub domain
	"legacy.internal",                      // the hosts file
	NodeName,                               // the hosts file, the node's line
	"registry.kube-system.svc.cluster.old", // the suffix rewrite (old_dns_domains)
	// the regex rewrite, absolute: kubespray's documented pattern is not
	// anchored, so it would rewrite the search list's expansions too
	// (registry.kube-system.my.domain.NS.svc.cluster.local), in CoreDNS
	// as here, and answer for another name than the question's.
	"registry.kube-system.my.domain.",
	"www.example.com", // an external name
}

// resolvers are the pods that look lookupNames up, by stub resolver: the
// binary (in the resolvers directory on the node) and the image it runs in.
var resolvers = []struct{ pod, binary, image string }{
	{"glibc", "resolveloop-glibc", DnsutilsImage},
	{"musl", "resolveloop-musl", BusyboxImage},
	{"go", "resolveloop-go", BusyboxImage},
}

// pauseMS is each resolver's pause between two lookups: with three pods,
// well over 20 lookups a second in all.
const pauseMS = 50

// settle is how long each step runs under the pods' lookups once its
// commands are done.
const settle = 12 * time.Second

// migrationStep is one step of deploy/README.md's migration or its undo.
type migrationStep struct {
	name string
	run  func(t *testing.T, ctx context.Context)
}

func (m *migration) steps() []migrationStep {
	return []migrationStep{
		{"0 CoreDNS and node-cache", m.baseline},
		{"1 convert the Corefile", m.convert},
		{"2 side by side", m.sideBySide},
		{"3 canary node takes over node-local", m.canary},
		{"5 replace CoreDNS", m.replace},
		{"undo 5a: CoreDNS back", m.coreDNSBack},
		{"undo 3: node-cache back", m.undoCanary},
		{"undo 5b: dnsconfigurer deleted", m.deleteOurs},
	}
}

// step runs one step inside its window and lets the lookups go on for
// settle afterwards.
func (m *migration) step(t *testing.T, s migrationStep) {
	ctx := testContext(t, 10*time.Minute)
	from := time.Now()
	defer func() {
		m.mu.Lock()
		m.windows = append(m.windows, window{s.name, from, time.Now()})
		m.mu.Unlock()
	}()
	s.run(t, ctx)
	if t.Failed() {
		return
	}
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// setUp builds the resolvers, starts the stub domain's server, applies the
// operator's DNS and starts the resolving pods.
func (m *migration) setUp(t *testing.T) {
	c := m.c
	ctx := testContext(t, 10*time.Minute)
	if err := m.buildResolvers(ctx); err != nil {
		t.Fatal(err)
	}
	stub, err := startStubAt(c.Node, StubZonePort, []string{StubZone}, StubZoneA, StubZoneAAAA)
	if err != nil {
		t.Fatalf("stub domain's server: %v", err)
	}
	m.outer.Cleanup(stub.Close)

	manifests := c.path("operator.yaml")
	if err := os.WriteFile(manifests, []byte(operatorManifests(ClusterDNS)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, "apply", "-f", manifests); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []struct{ kind, name string }{{"deployment", "coredns"}, {"daemonset", "node-local-dns"}} {
		if err := c.WaitRollout(ctx, w.kind, "kube-system", w.name); err != nil {
			t.Fatalf("%v\n%s", err, c.logTails(20))
		}
	}
	if err := m.waitNodeCache(ctx, true); err != nil {
		t.Fatal(err)
	}

	web := m.webService(t, ctx)
	registry, err := c.Client.CoreV1().Services("kube-system").Get(ctx, "registry", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.want = map[string]string{
		"web":                                  web,
		"kubernetes.default":                   kubernetesIP,
		"db.corp.example":                      StubZoneA.String(),
		"legacy.internal":                      HostsA.String(),
		NodeName:                               NodeIP.String(),
		"registry.kube-system.svc.cluster.old": registry.Spec.ClusterIP,
		"registry.kube-system.my.domain.":      registry.Spec.ClusterIP,
		"www.example.com":                      ExternalA.String(),
	}
	// The operator's CoreDNS has no readiness probe: its rollout ends
	// before it has the new Service, and a lookup in its first seconds
	// got SERVFAIL. The lookups start once the cluster DNS address answers
	// web from the node.
	if err := m.waitAnswered(ctx, "web."+m.ns+".svc.cluster.local.", m.want["web"]); err != nil {
		t.Fatal(err)
	}
	if err := m.waitCoreDNSPods(ctx, "web."+m.ns+".svc.cluster.local.", m.want["web"]); err != nil {
		t.Fatal(err)
	}
	for _, r := range resolvers {
		runPod(t, c, m.ns, m.resolverPod(r.pod, r.binary, r.image))
	}
}

// webService makes the test's namespace and its Service "web", and
// returns the Service's address.
func (m *migration) webService(t *testing.T, ctx context.Context) string {
	m.ns = namespace(m.outer, m.c)
	web, err := m.c.Client.CoreV1().Services(m.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return web.Spec.ClusterIP
}

// waitAnswered waits until the cluster DNS address answers name, asked
// from the node's network namespace, with the one address want.
func (m *migration) waitAnswered(ctx context.Context, name, want string) error {
	return m.waitAnsweredAt(ctx, m.c.KubeDNS(), name, want)
}

// waitCoreDNSPods waits until each CoreDNS pod, asked itself, answers
// name with want: kubeadm's CoreDNS has no readiness probe for a new
// Service, and kube-dns sends a lookup to either replica.
func (m *migration) waitCoreDNSPods(ctx context.Context, name, want string) error {
	pods, err := m.c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
		if err := m.waitAnsweredAt(ctx, ip, name, want); err != nil {
			return err
		}
	}
	return nil
}

// waitAnsweredAt is waitAnswered at server.
func (m *migration) waitAnsweredAt(ctx context.Context, server netip.Addr, name, want string) error {
	return waitFor(ctx, fmt.Sprintf("%s answered %s at %s", name, want, server), func(ctx context.Context) (bool, error) {
		var r *dns.Msg
		err := testkit.InNetNS(m.c.Node.NetNSPath, func() error {
			var err error
			r, err = dns.ExchangeContext(ctx, new(dns.Msg).SetQuestion(name, dns.TypeA), netip.AddrPortFrom(server, 53).String())
			return err
		})
		if err != nil {
			return false, err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return false, fmt.Errorf("rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		a, ok := r.Answer[0].(*dns.A)
		if !ok || a.A.String() != want {
			return false, fmt.Errorf("answer %v, want %s", r.Answer[0], want)
		}
		return true, nil
	})
}

// buildResolvers builds the three lookup loops into the node's resolvers
// directory: testdata/resolveloop.c against glibc and (static) musl, and
// resolveloop with CGO_ENABLED=0.
func (m *migration) buildResolvers(ctx context.Context) error {
	return buildResolvers(ctx, m.c.path("resolvers"))
}

// buildResolvers builds the lookup loops into dir (a hostPath every node
// shares).
func buildResolvers(ctx context.Context, dir string) error {
	root, err := containerd.ModuleRoot()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src := filepath.Join(root, "test", "cluster", "testdata", "resolveloop.c")
	for _, b := range []struct {
		bin  string
		args []string
		env  []string
	}{
		{"gcc", []string{"-O2", "-o", filepath.Join(dir, "resolveloop-glibc"), src}, nil},
		// musl-gcc comes with Debian's musl-tools (test/e2e/setup.sh).
		{"musl-gcc", []string{"-static", "-O2", "-o", filepath.Join(dir, "resolveloop-musl"), src}, nil},
		{"go", []string{"build", "-o", filepath.Join(dir, "resolveloop-go"), "./test/cluster/resolveloop"}, []string{"CGO_ENABLED=0"}},
	} {
		cmd := exec.CommandContext(ctx, b.bin, b.args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w\n%s (test/e2e/setup.sh installs gcc's and musl's tool chains)", b.bin, strings.Join(b.args, " "), err, out)
		}
	}
	return nil
}

// resolverPod is a ClusterFirst pod whose container "c" runs one lookup
// loop from the node's resolvers directory.
func (m *migration) resolverPod(name, binary, image string) *corev1.Pod {
	names := lookupNames
	if m.names != nil {
		names = m.names
	}
	return m.c.resolverPod(name, image, append([]string{binary, strconv.Itoa(pauseMS)}, names...))
}

// resolverPod is a ClusterFirst pod whose container "c" runs a lookup loop
// from the resolvers directory every node shares (buildResolvers): args
// are the binary's name and its arguments.
func (c *Cluster) resolverPod(name, image string, args []string) *corev1.Pod {
	p := onePod(name, image, append([]string{"/resolvers/" + args[0]}, args[1:]...))
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "resolvers", MountPath: "/resolvers", ReadOnly: true}}
	p.Spec.Volumes = []corev1.Volume{{Name: "resolvers", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: c.path("resolvers")},
	}}}
	return p
}

// waitNodeCache waits until the node-cache stand-in holds (or no longer
// holds) both addresses on the node, with its pod Ready (or gone).
func (m *migration) waitNodeCache(ctx context.Context, present bool) error {
	c := m.c
	return waitFor(ctx, fmt.Sprintf("node-cache on the node: %v", present), func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=node-local-dns"})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		addrs, err := c.localAddrs("nodelocaldns")
		if err != nil {
			return false, err
		}
		if present {
			return ready == 1 && addrs == 2, fmt.Errorf("%d node-cache pods Ready, %d of its addresses on nodelocaldns", ready, addrs)
		}
		return len(pods.Items) == 0 && addrs == 0, fmt.Errorf("%d node-cache pods, %d of its addresses on nodelocaldns", len(pods.Items), addrs)
	})
}

// waitOurSetup waits until dnsconfigurer's set-up is (or is not) on the
// node.
func (m *migration) waitOurSetup(ctx context.Context, present bool) error {
	return waitFor(ctx, fmt.Sprintf("dnsconfigurer's node-local set-up on the node: %v", present), func(ctx context.Context) (bool, error) {
		got, err := m.c.nodeLocalSetupOn("lo")
		return got == present && err == nil, fmt.Errorf("present %v (%v)", got, err)
	})
}

// baseline: CoreDNS and node-cache answer, before anything of
// dnsconfigurer's is there.
func (m *migration) baseline(t *testing.T, ctx context.Context) {
	if present, err := m.c.nodeLocalSetupOn("lo"); err != nil || present {
		t.Fatalf("dnsconfigurer's node-local set-up before the migration: %v (%v)", present, err)
	}
}

// convert is step 1: the coredns ConfigMap, as kubectl gives it, through
// dnsconfigurer convert into the copy of the take-over example.
func (m *migration) convert(t *testing.T, ctx context.Context) {
	c := m.c
	deployDir, err := DeployDir()
	if err != nil {
		t.Fatal(err)
	}
	// The operator works in a copy of deploy/, at the example's depth.
	work := c.path("work")
	if err := os.CopyFS(filepath.Join(work, "deploy"), os.DirFS(deployDir)); err != nil {
		t.Fatal(err)
	}
	m.myDNS = filepath.Join(work, "deploy", "overlays", "my-dns")
	if err := os.CopyFS(m.myDNS, os.DirFS(filepath.Join(deployDir, "examples", "take-over-nodelocaldns"))); err != nil {
		t.Fatal(err)
	}
	cm, err := c.Kubectl(ctx, "-n", "kube-system", "get", "configmap", "coredns", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(work, "coredns.yaml")
	if err := os.WriteFile(in, []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, c.Product, "convert", "--configmap", "dnsconfigurer-dns", "--output", filepath.Join(m.myDNS, "dns-config", "cm.yaml"), in)
	report, err := cmd.CombinedOutput()
	t.Logf("dnsconfigurer convert:\n%s", report)
	if err != nil {
		t.Fatalf("convert: %v (exit 3: a directive was dropped)", err)
	}
	if m.overlay, err = c.WriteOverlayFor(m.myDNS, "overlay-my-dns"); err != nil {
		t.Fatal(err)
	}
}

// sideBySide is step 2: kubectl apply -k of the copy; the new server
// answers every name as CoreDNS does, asked directly.
func (m *migration) sideBySide(t *testing.T, ctx context.Context) {
	c := m.c
	if out, err := c.Kubectl(ctx, "apply", "-k", m.overlay); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []struct{ ns, name string }{{DeployNamespace, DNSDeployment}, {DeployNamespace, WebhookName}} {
		if err := c.WaitRollout(ctx, "deployment", w.ns, w.name); err != nil {
			t.Fatalf("%v\n%s", err, c.describeNamespace(w.ns))
		}
	}
	// dig in the glibc pod, at dnsconfigurer's Service and at CoreDNS's
	// (through node-cache), for each name made absolute.
	for _, name := range lookupNames {
		fqdn := m.absolute(name)
		for _, server := range []string{"10.96.0.53", ClusterDNS.String()} {
			out, err := c.exec(ctx, m.ns, "glibc", "dig", "+short", "+tries=2", "+time=2", "@"+server, fqdn, "A")
			if err != nil {
				t.Fatal(err)
			}
			// dig notes a retry (a Service kube-proxy has only just
			// programmed) on a ";;" line before the answer.
			var addrs []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if l != "" && !strings.HasPrefix(l, ";;") {
					addrs = append(addrs, l)
				}
			}
			if got := strings.Join(addrs, ","); got != m.want[name] {
				t.Errorf("dig @%s %s: %q, want %q", server, fqdn, got, m.want[name])
			}
		}
	}
}

// absolute is the name a lookup of name ends at (the search list's first
// match for the one relative cluster name).
func (m *migration) absolute(name string) string {
	switch name {
	case "web":
		return "web." + m.ns + ".svc." + ClusterDomain + "."
	case "kubernetes.default":
		return "kubernetes.default.svc." + ClusterDomain + "."
	}
	return strings.TrimSuffix(name, ".") + "."
}

// canary is step 3: dnsconfigurer's stage starts beside node-cache on
// the labelled node (both serve the addresses, from their own interfaces,
// with SO_REUSEPORT), then node-cache is asked off the node and leaves.
func (m *migration) canary(t *testing.T, ctx context.Context) {
	c := m.c
	readme := readDeployREADME(t)
	if _, err := m.nodeLocalQueries(ctx); err == nil {
		t.Fatal("dnsconfigurer's node-local stage answers before the label")
	}
	for _, args := range [][]string{
		{"-n", "kube-system", "patch", "daemonset", "node-local-dns", "--type", "merge", "-p", "'" + nodeCachePatch + "'"},
		{"label", "node", "NODE", "dnsconfigurer.io/canary=true"},
		{"-n", NodeNamespace, "rollout", "status", "daemonset/" + NodeLocalDS},
		{"label", "node", "NODE", "dnsconfigurer.io/node-cache=off"},
	} {
		readmeSays(t, readme, "kubectl "+strings.Join(args, " "))
		for i, a := range args {
			args[i] = strings.Trim(strings.ReplaceAll(a, "NODE", NodeName), "'")
		}
		if out, err := c.Kubectl(ctx, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if args[2] == "rollout" {
			// Ours serves beside node-cache before node-cache is asked off.
			if err := m.waitOurSetup(ctx, true); err != nil {
				t.Fatal(err)
			}
			if err := m.waitNodeCache(ctx, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.waitTakenOver(t, ctx)
}

// nodeCachePatch is deploy/README.md's patch of node-cache's DaemonSet: off
// nodes labelled dnsconfigurer.io/node-cache=off, and no restart of its
// running pods.
const nodeCachePatch = `{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null},"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"dnsconfigurer.io/node-cache","operator":"NotIn","values":["off"]}]}]}}}}}}}`

// waitTakenOver waits until node-cache has left the node and
// dnsconfigurer's stage holds its set-up, then checks that the pods'
// lookups reach the stage.
func (m *migration) waitTakenOver(t *testing.T, ctx context.Context) {
	c := m.c
	err := waitFor(ctx, "node-cache gone, dnsconfigurer's node-local set-up on the node", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=node-local-dns"})
		if err != nil {
			return false, err
		}
		present, err := m.c.nodeLocalSetupOn("lo")
		return len(pods.Items) == 0 && present && err == nil, fmt.Errorf("%d node-cache pods, set-up present %v (%v)", len(pods.Items), present, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	n0, err := m.nodeLocalQueries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = waitFor(ctx, "the pods' lookups at dnsconfigurer's node-local stage", func(ctx context.Context) (bool, error) {
		n, err := m.nodeLocalQueries(ctx)
		return n >= n0+50, fmt.Errorf("%d queries (%v)", n-n0, err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// replaceEdits are deploy/README.md's step 5 edits of the copy: the
// placement component and the addresses.
var replaceEdits = []string{
	`sed -i 's#components/side-by-side#components/replace-coredns#' kustomization.yaml`,
	`sed -i 's#^  clusterDNS: .*#  clusterDNS: 10.96.0.10#; s#^  clusterDNSUpstream: .*#  clusterDNSUpstream: 10.96.0.11#' cluster-settings.yaml`,
}

// replace is step 5: the copy turned into its replace-coredns form and
// applied, CoreDNS scaled to 0, the side-by-side server removed.
func (m *migration) replace(t *testing.T, ctx context.Context) {
	c := m.c
	readme := readDeployREADME(t)
	for _, e := range replaceEdits {
		readmeSays(t, readme, e)
		cmd := exec.CommandContext(ctx, "sh", "-c", e)
		cmd.Dir = m.myDNS
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", e, err, out)
		}
	}
	oldNodeLocal, err := c.nodeLocalPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s kubectl apply -k (the replace form)", time.Now().Format("15:04:05.000"))
	if out, err := c.Kubectl(ctx, "apply", "-k", m.overlay); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := c.WaitRollout(ctx, "deployment", "kube-system", DNSDeployment); err != nil {
		t.Fatalf("%v\n%s", err, c.describeNamespace("kube-system"))
	}
	t.Logf("%s cluster DNS rolled out", time.Now().Format("15:04:05.000"))
	if err := c.WaitRollout(ctx, "daemonset", NodeNamespace, NodeLocalDS); err != nil {
		t.Fatalf("%v\n%s", err, c.describeNamespace(NodeNamespace))
	}
	t.Logf("%s node-local rolled out", time.Now().Format("15:04:05.000"))
	for _, args := range [][]string{
		{"-n", "kube-system", "scale", "deployment", "coredns", "--replicas=0"},
		{"-n", NodeNamespace, "get", "pods", "-o", "wide"},
		{"-n", DeployNamespace, "delete", "deployment/dnsconfigurer-dns", "service/dnsconfigurer-dns", "service/dnsconfigurer-dns-upstream",
			"poddisruptionbudget/dnsconfigurer-dns", "configmap/dnsconfigurer-dns", "serviceaccount/dnsconfigurer-dns"},
	} {
		readmeSays(t, readme, "kubectl "+strings.Join(args, " "))
		if args[1] == NodeNamespace {
			// No old node-local pod left: a draining one still forwards
			// to the side-by-side server.
			err := waitFor(ctx, "one node-local pod", func(ctx context.Context) (bool, error) {
				uids, err := c.nodeLocalPods(ctx)
				return len(uids) == 1, fmt.Errorf("%d pods (%v)", len(uids), err)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s kubectl %s", time.Now().Format("15:04:05.000"), strings.Join(args, " "))
		if out, err := c.Kubectl(ctx, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	// The new node-local pod waits for its new upstream to answer before
	// it serves; the old one must serve until then.
	c.checkHandover(t, m.logs, oldNodeLocal)
	t.Cleanup(func() {
		// What the node-local stage and the cluster DNS said meanwhile.
		for _, q := range [][]string{
			{"-n", NodeNamespace, "logs", "-l", "app.kubernetes.io/component=node-local-dns", "--timestamps", "--tail=40", "--prefix"},
			{"-n", "kube-system", "logs", "-l", "app.kubernetes.io/instance=dnsconfigurer-dns", "--timestamps", "--tail=20", "--prefix"},
		} {
			out, _ := c.Kubectl(context.Background(), q...)
			t.Logf("kubectl %s:\n%s", strings.Join(q, " "), out)
		}
	})
	if err := c.waitNoCoreDNS(ctx); err != nil {
		t.Fatal(err)
	}
	m.waitTakenOver(t, ctx)
}

// coreDNSBack is the first part of step 5's undo: CoreDNS scaled up
// again, next to dnsconfigurer's server in kube-dns.
func (m *migration) coreDNSBack(t *testing.T, ctx context.Context) {
	for _, args := range [][]string{
		{"-n", "kube-system", "scale", "deployment", "coredns", "--replicas=2"},
		{"-n", "kube-system", "rollout", "status", "deployment/coredns"},
	} {
		if out, err := m.c.Kubectl(ctx, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}

// undoCanary is step 3's undo, in reverse: node-cache back beside
// dnsconfigurer's stage, then ours off the node.
func (m *migration) undoCanary(t *testing.T, ctx context.Context) {
	if out, err := m.c.Kubectl(ctx, "label", "node", "--all", "dnsconfigurer.io/node-cache-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := m.waitNodeCache(ctx, true); err != nil {
		t.Fatal(err)
	}
	if out, err := m.c.Kubectl(ctx, "label", "node", "--all", "dnsconfigurer.io/canary-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := m.waitOurSetup(ctx, false); err != nil {
		t.Fatal(err)
	}
}

// deleteOurs is the end of step 5's undo: dnsconfigurer's server pods
// leave kube-dns while they still serve (so that kube-proxy moves the UDP
// flows node-cache keeps open to them over to CoreDNS), then kubectl
// delete -k of the copy, which leaves kube-dns and CoreDNS's objects.
func (m *migration) deleteOurs(t *testing.T, ctx context.Context) {
	c := m.c
	readme := readDeployREADME(t)
	unlabel := []string{"-n", "kube-system", "label", "pods", "-l", "app.kubernetes.io/instance=dnsconfigurer-dns", "k8s-app-"}
	readmeSays(t, readme, "kubectl "+strings.Join(unlabel, " "))
	pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=dnsconfigurer-dns"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, unlabel...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Gone from kube-proxy's rules for kube-dns and kube-dns-upstream
	// (their endpoint rules carry the Service's name as a comment; our
	// own upstream Service still has them).
	err = waitFor(ctx, "dnsconfigurer's server pods out of kube-proxy's rules for kube-dns", func(ctx context.Context) (bool, error) {
		rules, err := exec.CommandContext(ctx, "ip", "netns", "exec", c.Node.NetNS, "iptables-save", "-t", "nat").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("iptables-save: %w: %s", err, rules)
		}
		for _, l := range strings.Split(string(rules), "\n") {
			if !strings.Contains(l, "kube-system/kube-dns") {
				continue
			}
			for _, p := range pods.Items {
				if p.Status.PodIP != "" && strings.Contains(l, p.Status.PodIP+":53") {
					return false, fmt.Errorf("pod %s (%s) still in kube-proxy's rules: %s", p.Name, p.Status.PodIP, l)
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, "delete", "-k", m.overlay); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, o := range []struct{ kind, name string }{{"service", "kube-dns"}, {"deployment", "coredns"}, {"configmap", "coredns"}, {"daemonset", "node-local-dns"}} {
		if _, err := c.Kubectl(ctx, "-n", "kube-system", "get", o.kind, o.name); err != nil {
			t.Errorf("after the rollback: %v", err)
		}
	}
	if err := m.waitNodeCache(ctx, true); err != nil {
		t.Fatal(err)
	}
}

// nodeLocalQueries is the stage's query count, from its /metrics on the
// take-over example's port (9354: node-cache holds 9353).
func (m *migration) nodeLocalQueries(ctx context.Context) (int, error) {
	return m.c.nodeLocalQueriesAt(ctx, 9354)
}

// readmeSays fails t unless deploy/README.md (readme) holds command as
// written: the test runs the guide's own commands.
func readmeSays(t *testing.T, readme, command string) {
	t.Helper()
	if !strings.Contains(readme, command) {
		t.Fatalf("deploy/README.md does not say %s", command)
	}
}

// readDeployREADME returns deploy/README.md.
func readDeployREADME(t *testing.T) string {
	dir, err := DeployDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lookupLine is one line of a lookup loop's output.
type lookupLine struct {
	at     time.Time
	name   string
	ok     bool
	tookMS int
	detail string // the addresses, or why it failed
}

// parseLookup parses "<unix ms> <name> ok|fail <ms> <detail>".
func parseLookup(s string) (lookupLine, bool) {
	f := strings.SplitN(s, " ", 5)
	if len(f) < 4 || (f[2] != "ok" && f[2] != "fail") {
		return lookupLine{}, false
	}
	ms, err1 := strconv.ParseInt(f[0], 10, 64)
	took, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil {
		return lookupLine{}, false
	}
	l := lookupLine{at: time.UnixMilli(ms), name: f[1], ok: f[2] == "ok", tookMS: took}
	if len(f) == 5 {
		l.detail = f[4]
	}
	return l, true
}

// stepFigures are one window's counts.
type stepFigures struct {
	lookups, failed, changed, longestMS int
	bad, slow                           []string
	// spans are the failed and slow lookups' times.
	spans []span
}

// check reads the pods' logs and reports each step's lookups, failures,
// changed answers and longest lookup; every step must have at least 20
// lookups a second, none failed and none changed.
func (m *migration) check(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	m.mu.Lock()
	windows := slices.Clone(m.windows)
	m.mu.Unlock()
	if len(windows) == 0 || m.ns == "" {
		t.Fatal("no step ran")
	}
	figures := make([]stepFigures, len(windows))
	for _, r := range resolvers {
		lines, err := m.podLines(ctx, r.pod)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			i := slices.IndexFunc(windows, func(w window) bool { return !l.at.Before(w.from) && l.at.Before(w.to) })
			if i < 0 {
				continue
			}
			f := &figures[i]
			f.lookups++
			f.longestMS = max(f.longestMS, l.tookMS)
			if !l.ok || l.tookMS >= 1000 {
				f.spans = append(f.spans, span{l.at.Add(-time.Duration(l.tookMS) * time.Millisecond), l.at})
			}
			if l.tookMS >= 1000 {
				f.slow = append(f.slow, fmt.Sprintf("%s %s %s: %d ms", l.at.Format("15:04:05.000"), r.pod, l.name, l.tookMS))
			}
			switch {
			case !l.ok:
				f.failed++
				f.bad = append(f.bad, fmt.Sprintf("%s %s %s: failed after %d ms: %s", l.at.Format("15:04:05.000"), r.pod, l.name, l.tookMS, l.detail))
			case l.detail != m.want[l.name]:
				f.changed++
				f.bad = append(f.bad, fmt.Sprintf("%s %s %s: %s, want %s", l.at.Format("15:04:05.000"), r.pod, l.name, l.detail, m.want[l.name]))
			}
		}
	}
	var total stepFigures
	for i, w := range windows {
		f := figures[i]
		fmt.Printf("migration: step %s: lookups %d failed %d changed %d longest-ms %d\n", w.name, f.lookups, f.failed, f.changed, f.longestMS)
		total.lookups += f.lookups
		total.failed += f.failed
		total.changed += f.changed
		if rate := float64(f.lookups) / w.to.Sub(w.from).Seconds(); rate < 20 {
			t.Errorf("step %s: %.1f lookups/s, want at least 20", w.name, rate)
		}
		if len(f.slow) > 0 {
			t.Logf("step %s: lookups of a second or more (a retry after a lost query):\n%s", w.name, strings.Join(f.slow[:min(len(f.slow), 30)], "\n"))
		}
		if len(f.bad) > 0 {
			t.Errorf("step %s: %d failed, %d changed:\n%s", w.name, f.failed, f.changed, strings.Join(f.bad[:min(len(f.bad), 30)], "\n"))
		}
		if len(f.spans) > 0 {
			t.Logf("step %s: the DNS components' logs within 6 s of those lookups:\n%s", w.name, m.logs.around(f.spans, 6*time.Second, 200))
		}
	}
	t.Logf("migration: %d lookups, %d failed, %d changed, over %d steps", total.lookups, total.failed, total.changed, len(windows))
}

// podLines returns the lookup lines a resolver pod has printed.
func (m *migration) podLines(ctx context.Context, pod string) ([]lookupLine, error) {
	return m.c.lookupLines(ctx, m.ns, pod)
}

// waitNoCoreDNS waits until no CoreDNS pod is left behind kube-dns: the
// pods labelled k8s-app: kube-dns that are not dnsconfigurer's.
func (c *Cluster) waitNoCoreDNS(ctx context.Context) error {
	return waitFor(ctx, "no CoreDNS pod", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns,app.kubernetes.io/instance!=dnsconfigurer-dns"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, fmt.Errorf("%d CoreDNS pods", len(pods.Items))
	})
}
