// Package v1alpha1 holds dnsconfigurer's versioned config files
// (apiVersion: dnsconfigurer.io/v1alpha1), one kind per component.
//
// It is the one home of every setting's default and validation rule.
// Each kind has SetDefaults and Validate. Flags show the Default*
// constants here, and components fall back to them when a field is zero.
// test/apidefaults checks that each component's fallback equals the
// default here, and ties the copies the pure core still keeps (the policy
// names). Shared rules are functions here: ValidateClusterDomain,
// ValidateNdots, IsDNSLabel. The pure core (pkg/policy, the record store)
// may import this package, which imports nothing of the module.
//
// It imports only the standard library. Decoding from YAML lives in
// cmd/dnsconfigurer, which layers the flags set on the command line over
// the file, and the file over the defaults.
package v1alpha1
