// Package lint checks the pod templates of manifests for DNS problems and
// prints the findings as text, JSON or SARIF 2.1.0.
//
// The checks are pkg/policy's; this package adds where each finding is: file,
// document, line, object and the full field path. It must not import
// client-go.
package lint
