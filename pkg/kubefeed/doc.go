// Package kubefeed puts Kubernetes objects and manifests into the record
// store of pkg/store.
//
// Cluster runs client-go reflectors (Services, EndpointSlices unless
// NoEndpoints, Namespaces, and Pods and Nodes when Pods is set, which the
// command does for verified pod records) without informer caches: each
// event converts the object to the store's slim record (ToService,
// ToEndpointSlice, ToPod, ToNode: a Node's name and topology zone label)
// at once, and an object that does not convert is removed from the store
// and reported. A reflector keeps nothing: a relist asks the store what it
// holds (store.Keys). A streamed initial list (WatchList) is stored by
// its watch as it arrives, before the reflector sees it (stream): the
// reflector gets a placeholder for each object, and the list keeps an
// 8-byte hash of each key until its end deletes what it no longer has.
// The reflectors' clients decode a Pod or a Node to the fields the
// converters read, and a watch event's object in place
// (internal/kubewire): ToPod and ToNode read nothing else (FuzzIngest
// checks ToPod). Conversion refuses the
// names the newest API server refuses (a Service name is a DNS-1123 label
// since Kubernetes 1.36) and the few it stores that DNS cannot carry, so
// every name the store holds fits a DNS message. The store is published
// after the first full sync, then right after each change: a publish costs
// what the change touched, and the changes that arrive while one runs go
// into the next.
//
// Manifests loads the YAML manifests a user would kubectl apply from a file
// or directory and reloads them Debounce (100ms) after the last change
// (internal/filewatch). A file, document or object that does not load is
// skipped and the rest is served; only a path that cannot be read keeps
// the previous records.
//
// Feed picks the source a server configuration names (Manifests, else
// Cluster) and follows its reloads: a change of what the cluster feed
// watches starts it again from an empty store.
//
// Skips reports what is skipped: objects_skipped_total{kind,reason}, one
// log record per object and problem (kept in a bounded record, dropped
// when the object converts or goes), and a Warning Event on an object of
// the API server.
//
// This is the only DNS package that imports client-go; it must not import
// miekg/dns (internal/layering checks it).
package kubefeed
