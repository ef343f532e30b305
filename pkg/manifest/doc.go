// Package manifest reads Kubernetes manifests as kubectl apply -f takes
// them: files, directories (-R), stdin, multi-document YAML, JSON streams
// and Lists. Each object keeps where it came from (file, document, line).
// Documents are read one at a time; reads are capped per object, per
// document, in objects and in the bytes kept.
//
// It reads no API types and must not import client-go.
package manifest
