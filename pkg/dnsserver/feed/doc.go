// Package feed puts Kubernetes objects into the record store: Cluster runs
// client-go informers (Services, EndpointSlices, Namespaces, and Pods when
// pod records are verified), and Manifests loads the YAML manifests a user
// would kubectl apply from a file or directory and reloads them on change
// (fsnotify). Objects are converted to the store's slim records on arrival
// (ToService, ToEndpointSlice, ToPod); informer caches keep stripped objects
// only. A manifest that does not load is reported with its file and
// document index and the previous records keep being served.
//
// This is the only DNS package that imports client-go; it must not import
// miekg/dns.
package feed
