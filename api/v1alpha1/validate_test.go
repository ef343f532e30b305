package v1alpha1

import (
	"strings"
	"testing"
)

// configuration is what each kind of configuration has.
type configuration[T any] interface {
	*T
	SetDefaults()
	Validate() error
}

// defaulted is the zero T after SetDefaults; it fails the test when that
// does not validate.
func defaulted[T any, P configuration[T]](t *testing.T) T {
	t.Helper()
	var c T
	P(&c).SetDefaults()
	if err := P(&c).Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	return c
}

// validateCase changes a zero configuration; Validate after SetDefaults
// must then give an error starting with wantErr, or none when it is "".
type validateCase[T any] struct {
	name    string
	mutate  func(*T)
	wantErr string
}

func testValidate[T any, P configuration[T]](t *testing.T, tests []validateCase[T]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c T
			tt.mutate(&c)
			P(&c).SetDefaults()
			err := P(&c).Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("Validate = %v, want an error starting %q", err, tt.wantErr)
			}
		})
	}
}
