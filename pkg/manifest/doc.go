// Package manifest reads Kubernetes manifests as kubectl apply -f takes
// them: files, directories (-R), stdin, multi-document YAML, JSON streams
// and Lists. Each object keeps where it came from (file, document, line).
// Reads are capped per file, in documents and in total bytes.
//
// It reads no API types and must not import client-go.
package manifest
