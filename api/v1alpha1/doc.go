// Package v1alpha1 holds dnsconfigurer's versioned config files
// (apiVersion: dnsconfigurer.io/v1alpha1), one kind per component.
//
// It is the one home of every setting's default and validation rule.
// Each kind has SetDefaults and Validate. Flags show the Default*
// constants here, and components fall back to them when a field is zero.
// test/apidefaults checks that each component's fallback equals the
// default here. pkg/policy is pure core and may not import this package,
// so that test also ties its copies (MaxNdots, the policy names).
//
// It imports only the standard library. Decoding from YAML lives in
// cmd/dnsconfigurer, which layers the flags set on the command line over
// the file, and the file over the defaults.
package v1alpha1
