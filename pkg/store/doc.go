// Package store is the record store: the model the Kubernetes feeds write
// (pkg/kubefeed) and the DNS servers read (pkg/clusterdns, pkg/nsmetrics).
//
// It holds slim records (Service, EndpointSlice, Pod, Namespace) converted by
// the feed from Kubernetes objects, and publishes from them an immutable
// Snapshot: a name index keyed by the lowercase fully qualified name (with the
// trailing dot) whose nodes carry typed record data (addresses, SRV, CNAME,
// PTR, TXT). A Store swaps its current Snapshot atomically on Publish, so a
// reader that loaded a Snapshot never sees a half-applied update.
//
// A Publish costs what changed, not the cluster. Records are grouped in
// units of contribution (unit.go): a Service with the EndpointSlices
// labelled with it, a Pod, a Namespace object, a known namespace's
// <ns>.svc and <ns>.pod names, and the fixed names. The record rules (the
// builder: build.go, service.go, srv.go, endpoints.go) run over one unit
// at a time. A unit's first change after a Publish keeps its records as
// they were; the next Publish (publish.go) builds what the unit
// contributed from them (or takes it from the contributions kept of
// recently changed units of many names: recent.go), takes that out of the
// published state (applied.go) and puts the new contribution in. A change
// of a Service's endpoints alone is applied as a delta instead (delta.go):
// the endpoints that went and came, and the Service's own name and SRV
// names made again, with neither contribution built. A Service built
// again keeps its endpoints' names and takes the nodes of its unchanged
// endpoints from its previous contribution (epmemo.go, endpoints.go), so
// a moved endpoint costs its own names.
//
// Most names have one contributor, and for them the published node is
// the contribution: the Snapshot itself is the index. Only names of two
// or more contributions (a PTR shared by two Services, a pod IP of two
// pods, <ns>.svc) are kept aside, as a count of empty non-terminals and
// the data nodes, told apart by their content, and merged again when one
// changes, with addresses and PTRs deduplicated and sorted as one build
// over every record makes them. A contribution to take out that is not
// there (a bug) makes the Publish rebuild everything. Namespaces, counts
// and pod IPs are kept by reference counts. SetOptions and Replace
// rebuild everything, and so does a change that touches more than an
// eighth of the objects (a resync, a drain that moves every endpoint:
// applying a unit costs about four times what building it in a rebuild
// does); a rebuild builds the units on a second goroutine while it adds
// them. BenchmarkWideChange against BenchmarkRebuild gives the two.
//
// One index keeps what the pods say of their IPs (podindex.go): each
// pod's claim holds its namespace (pods verified) and its node, with one
// count, so PodNamespace and ClientTopology always follow the same pods.
// The counts live in the map a Snapshot publishes, edited copy-on-write,
// not in a second, mutable one.
// A node's topology zone is kept beside it (topology.go); nodes make no
// name.
//
// A published Node is packed: a header and its records in one allocation
// that holds no pointer, so the collector marks it and never scans it.
// Package pack lays it out (over internal/unsafeptr, the product's only
// unsafe), and nothing outside this package reaches it (LookupBytes
// serves a name held in bytes). A build makes drafts of its nodes and
// packs them when it finishes; a rebuild packs them in shared chunks
// (rebuildArena). The Service records are packed too, one string each
// (svcrecord.go). BenchmarkHeap gives the live heap at rest (12, 53 and
// 105 MiB at 10k, 50k and 100k Services), its objects and the time of a
// collection on one CPU (39 ms at 100k).
//
// The published index is sharded copy-on-write (pack.Map): runs of about
// 32 names sorted by hash behind a two-level array; a Publish copies the
// shards it touches, and a Snapshot shares the rest with the one before.
// Lookup is one hash and a short walk of one shard: the persistent hash
// map tried first (github.com/benbjohnson/immutable) cost 3-4 times a Go
// map per Lookup, on the path of every reply-cache miss. Each Publish logs
// the names it changed (changes.go), so a reader of an older Snapshot
// learns what to forget (ChangedSince; the reply cache of pkg/clusterdns
// uses it). The PTR addresses, which need order, are such a sorted map,
// made for a Snapshot only when HasPTRIn first asks (ptrs.go): from the
// newest one made and the log, or from every name when the log no longer
// reaches back.
//
// The record layout follows the Kubernetes DNS-Based Service Discovery
// specification 1.1.0 plus what CoreDNS's kubernetes plugin serves:
//
//   - <svc>.<ns>.svc.<zone>: ClusterIPs (every entry of clusterIPs), or the
//     served endpoint addresses of a headless Service (ready ones, or all
//     with PublishNotReadyAddresses; deduplicated across slices; a headless
//     Service without one has no name, as CoreDNS), or a CNAME for an
//     ExternalName Service; and, as CoreDNS, SRV for every port, named or
//     not (one record per target and port number: the Service name for a
//     ClusterIP Service, each served endpoint for a headless one; weight
//     100/N);
//   - _<port>._<proto>.<svc>.<ns>.svc.<zone>: SRV for named ports only
//     (ClusterIP: one record to the Service name; headless: one per served
//     endpoint, weight 100/N);
//   - <host>.<svc>.<ns>.svc.<zone>: the served endpoints of ClusterIP and
//     headless Services (as CoreDNS), <host> being the endpoint hostname,
//     else (with EndpointPodNames) the pod name, else the dashed IP
//     (10-1-2-3, fd00--1; fd00--0 for fd00::, as CoreDNS); a dashed name
//     is made by Lookup from its address's PTR rather than kept, unless
//     a hostname of its Service spells another address (endpoints.go);
//   - PTR for ClusterIPs and for served endpoints (in-addr.arpa, ip6.arpa);
//   - <dashed-ip>.<ns>.pod.<zone> for pods in the verified mode, made by
//     Lookup from the pod-IP index rather than kept as names (the insecure
//     mode is answered by the wire layer without the store), and the pod
//     IPs' namespaces of PodNamespace (autopath by source);
//   - dns-version.<zone> TXT "1.1.0";
//   - ns.dns.<zone>, the SOA's and NS's name server, with no record;
//   - for a Service with external IPs and ports, its external node
//     (external.go), which the external zones of CoreDNS's k8s_external
//     read (Snapshot.External); no query name reaches it.
//
// A headless Service with spec.trafficDistribution PreferSameZone
// (PreferClose) or PreferSameNode also keeps, for its name and its SRV
// names, a variant per topology zone and (PreferSameNode) per node over
// the ready endpoints there; Snapshot.VariantFor picks a client's,
// pkg/topology's Prefer rule (variant.go). Such a Service's endpoint
// changes are built again, not applied as a delta.
//
// Every ancestor of a name inside the zone exists as an empty non-terminal,
// and so do <ns>.svc.<zone> (and <ns>.pod.<zone> unless pods are disabled)
// for every known namespace: one with a Namespace object, a Service or a Pod
// (EndpointSlices alone do not count), when the Namespaces option lets it
// through. IgnoreEmptyService drops Services without a served endpoint;
// NoEndpoints drops every endpoint record and headless Services.
//
// Each file uses only the files below it: at the ground the records,
// the options, the spellings of addresses and the variant keys; above
// them the pod-IP index, the change log and the packed Service records;
// then the builder, the units and the PTR sets; then a Service's rules,
// the published state and the Snapshot; then the Store with its records;
// then the delta; and on top the Publish.
//
// This package must not import miekg/dns, client-go, k8s.io/api or a logger;
// besides the standard library it imports github.com/benbjohnson/immutable
// and its internal package pack (with internal/unsafeptr).
package store
