package cluster

import (
	"fmt"
	"net/netip"
)

// The operator's cluster of TestClusterMigration: what a kubeadm cluster
// with NodeLocal DNSCache has before dnsconfigurer, customised the way
// operators customise it.
var (
	// StubZoneA is the answer of the stub domain's own server (corp.example,
	// on NodeIP:StubZonePort) for every name under it.
	StubZoneA    = netip.MustParseAddr("198.51.100.7")
	StubZoneAAAA = netip.MustParseAddr("2001:db8::7")
	// HostsA is the address of the Corefile's inline hosts entry.
	HostsA = netip.MustParseAddr("10.1.2.3")
)

const (
	// StubZone is the Corefile's stub domain.
	StubZone = "corp.example."
	// StubZonePort is the port of its server on NodeIP.
	StubZonePort = 5353
)

// operatorCorefile is kubeadm's Corefile (v1.34) with what operators add:
// a rewrite (answer auto, so that stub resolvers accept the answer), an
// inline hosts entry with the k3s-style NodeHosts file, and a stub domain
// in its own server block.
func operatorCorefile() string {
	return fmt.Sprintf(`.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    rewrite name exact registry.local registry.kube-system.svc.cluster.local answer auto
    hosts /etc/coredns/NodeHosts {
       %s legacy.internal
       ttl 60
       reload 15s
       fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
corp.example:53 {
    errors
    cache 30
    forward . %s:%d
}
`, HostsA, NodeIP, StubZonePort)
}

// indent prefixes every line of s with n spaces (a YAML block scalar).
func indent(s string, n int) string {
	pad := fmt.Sprintf("%*s", n, "")
	out := pad
	for i, r := range s {
		out += string(r)
		if r == '\n' && i < len(s)-1 {
			out += pad
		}
	}
	return out
}

// operatorManifests are kubeadm's CoreDNS add-on objects (ServiceAccount,
// RBAC, ConfigMap, Deployment, Service kube-dns at ClusterDNS), the
// ConfigMap with a NodeHosts key as k3s has it, the Service the rewrite
// points at, and NodeLocal DNSCache as its upstream manifest
// (nodelocaldns.yaml) has it: Service kube-dns-upstream, ConfigMap
// node-local-dns, DaemonSet node-local-dns.
//
// node-cache itself is not on the module proxy. Its stand-in runs what
// node-cache runs, CoreDNS with NodeLocal's Corefile, and does node-cache's
// set-up around it from a shell: both addresses on an interface of its own
// named "nodelocaldns" as node-cache's (a veth pair: this kernel has no
// dummy link type, which node-cache uses), node-cache's NOTRACK and ACCEPT
// rules with the node's own iptables, a listener on node-cache's own
// metrics port (0.0.0.0:9353), and on SIGTERM their removal once CoreDNS
// has stopped. The Corefile's "."
// goes to the cluster DNS, as kops's forwardToKubeDNS has it, so that the
// cluster DNS's stub domain, hosts and rewrite hold through it.
func operatorManifests() string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
%[1]s
  NodeHosts: |
    %[2]s %[3]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 2
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      tolerations:
      - key: CriticalAddonsOnly
        operator: Exists
      - key: node-role.kubernetes.io/control-plane
        effect: NoSchedule
      nodeSelector:
        kubernetes.io/os: linux
      containers:
      - name: coredns
        image: %[4]s
        args: ["-conf", "/etc/coredns/Corefile"]
        volumeMounts:
        - name: config-volume
          mountPath: /etc/coredns
          readOnly: true
        ports:
        - {containerPort: 53, name: dns, protocol: UDP}
        - {containerPort: 53, name: dns-tcp, protocol: TCP}
        - {containerPort: 9153, name: metrics, protocol: TCP}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            add: [NET_BIND_SERVICE]
            drop: [ALL]
          readOnlyRootFilesystem: true
        livenessProbe:
          httpGet: {path: /health, port: 8080, scheme: HTTP}
          initialDelaySeconds: 60
          timeoutSeconds: 5
          successThreshold: 1
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181, scheme: HTTP}
          periodSeconds: 1
      dnsPolicy: Default
      terminationGracePeriodSeconds: 30
      volumes:
      - name: config-volume
        configMap:
          name: coredns
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
    kubernetes.io/cluster-service: "true"
    kubernetes.io/name: CoreDNS
  annotations:
    prometheus.io/port: "9153"
    prometheus.io/scrape: "true"
spec:
  selector:
    k8s-app: kube-dns
  clusterIP: %[5]s
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
  - {name: metrics, port: 9153, protocol: TCP, targetPort: 9153}
---
apiVersion: v1
kind: Service
metadata:
  name: registry
  namespace: kube-system
spec:
  ports:
  - {name: http, port: 5000, protocol: TCP}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: node-local-dns
  namespace: kube-system
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns-upstream
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
  selector:
    k8s-app: kube-dns
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: node-local-dns
  namespace: kube-system
data:
  Corefile: |
    cluster.local:53 {
        errors
        cache {
                success 9984 30
                denial 9984 5
        }
        reload
        loop
        bind %[6]s %[5]s
        forward . __PILLAR__CLUSTER__DNS__ {
                force_tcp
        }
        prometheus :9253
        }
    in-addr.arpa:53 {
        errors
        cache 30
        reload
        loop
        bind %[6]s %[5]s
        forward . __PILLAR__CLUSTER__DNS__ {
                force_tcp
        }
        prometheus :9253
        }
    .:53 {
        errors
        cache 30
        reload
        loop
        bind %[6]s %[5]s
        forward . __PILLAR__CLUSTER__DNS__
        prometheus :9253
        }
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-local-dns
  namespace: kube-system
  labels:
    k8s-app: node-local-dns
spec:
  updateStrategy:
    rollingUpdate:
      maxUnavailable: 10%%
  selector:
    matchLabels:
      k8s-app: node-local-dns
  template:
    metadata:
      labels:
        k8s-app: node-local-dns
    spec:
      priorityClassName: system-node-critical
      serviceAccountName: node-local-dns
      hostNetwork: true
      dnsPolicy: Default
      terminationGracePeriodSeconds: 10
      tolerations:
      - key: CriticalAddonsOnly
        operator: Exists
      - effect: NoExecute
        operator: Exists
      - effect: NoSchedule
        operator: Exists
      containers:
      - name: node-cache
        image: %[7]s
        command: ["sh", "-c", %[8]q]
        securityContext:
          privileged: true
        ports:
        - {containerPort: 53, name: dns, protocol: UDP}
        - {containerPort: 53, name: dns-tcp, protocol: TCP}
        - {containerPort: 9253, name: metrics, protocol: TCP}
        volumeMounts:
        - name: config-volume
          mountPath: /etc/coredns
        - name: host
          mountPath: /host
      volumes:
      - name: config-volume
        configMap:
          name: node-local-dns
          items:
          - key: Corefile
            path: Corefile.base
      - name: host
        hostPath:
          path: /
`, indent(operatorCorefile(), 4), NodeIP, NodeName, CoreDNSImage, ClusterDNS, NodeLocalDNS, NodeCacheImage, nodeCacheScript())
}

// nodeCacheScript is the node-cache stand-in's set-up (see
// operatorManifests): node-cache's rules for each local address (raw
// NOTRACK both ways, for pods and for host-network clients, and filter
// ACCEPT), its Corefile with the upstream Service's address put in from the
// Service environment, and the teardown on SIGTERM.
func nodeCacheScript() string {
	return fmt.Sprintf(`set -u
ips="%s %s"
rules() {
  for ip in $ips; do for p in udp tcp; do
    chroot /host iptables -w -t raw "$1" PREROUTING -p $p -d $ip --dport 53 -j NOTRACK
    chroot /host iptables -w -t raw "$1" OUTPUT -p $p -s $ip --sport 53 -j NOTRACK
    chroot /host iptables -w -t raw "$1" OUTPUT -p $p -d $ip --dport 53 -j NOTRACK
    chroot /host iptables -w -t filter "$1" INPUT -p $p -d $ip --dport 53 -j ACCEPT
    chroot /host iptables -w -t filter "$1" OUTPUT -p $p -s $ip --sport 53 -j ACCEPT
  done; done
}
teardown() {
  kill -TERM "$pid" 2>/dev/null; wait "$pid"
  kill "$nc" 2>/dev/null
  rules -D
  ip link del nodelocaldns
  echo "node-cache stand-in: torn down"
  exit 0
}
ip link add nodelocaldns type veth peer name nodelocaldnsp
ip link set nodelocaldnsp up
ip link set nodelocaldns up
for ip in $ips; do ip addr add $ip/32 dev nodelocaldns; done
rules -I
sed "s/__PILLAR__CLUSTER__DNS__/$KUBE_DNS_UPSTREAM_SERVICE_HOST/g" /etc/coredns/Corefile.base > /tmp/Corefile
# node-cache's own metrics listener (-metrics-listen-address 0.0.0.0:9353).
nc -lk 9353 >/dev/null 2>&1 &
nc=$!
/coredns -conf /tmp/Corefile &
pid=$!
trap teardown TERM INT
wait "$pid"
teardown
`, NodeLocalDNS, ClusterDNS)
}
