// Package apidefaults checks that every component falls back to the
// default api/v1alpha1 gives the same setting.
//
// Most components read the api constant; the test keeps them from drifting
// back to a literal. The pure core (pkg/policy, pkg/autopath,
// pkg/store) may not import api/v1alpha1, and a few constants
// must stay constants for serve's flags: for those the test is the tie.
package apidefaults
