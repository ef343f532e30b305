// Package v1alpha1 holds dnsconfigurer's versioned configuration files
// (apiVersion: dnsconfigurer.io/v1alpha1): one kind per component, each with
// SetDefaults and Validate. Standard library only; decoding from YAML lives
// in cmd/dnsconfigurer, which applies flags on top of the file.
package v1alpha1
