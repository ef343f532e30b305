// Package feed puts Kubernetes objects into the record store.
//
// Cluster runs client-go reflectors (Services, EndpointSlices unless
// NoEndpoints, Namespaces, and Pods when Pods is set, which the command does
// for verified pod records) without informer caches: each event converts
// the object to the store's slim record (ToService, ToEndpointSlice, ToPod)
// at once, and an object that does not convert is logged and removed from
// the store. A reflector keeps nothing: a relist asks the store what it
// holds (store.Keys). A streamed initial list (WatchList) holds stripped
// objects (the fields DNS reads) until it is applied. Conversion refuses the
// names the API server refuses (manifests are not checked by it), so every
// name the store holds fits a DNS message. The store is published after
// the first full sync, then right after each change: a publish costs what
// the change touched, and the changes that arrive while one runs go into
// the next.
//
// Manifests loads the YAML manifests a user would kubectl apply from a file
// or directory and reloads them Debounce (100ms) after the last change
// (internal/filewatch). A manifest that does not load is reported with its
// file and document index and the previous records keep being served.
//
// This is the only DNS package that imports client-go; it must not import
// miekg/dns.
package feed
