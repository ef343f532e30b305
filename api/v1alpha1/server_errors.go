package v1alpha1

import (
	"errors"
	"fmt"
)

// ErrConfig marks an error of a configuration that Validate accepted but a
// component could not apply: a file it names is missing or broken, a
// record source is unusable. Commands report it as they report Validate's
// errors (a usage error); check it with errors.Is.
var ErrConfig = errors.New("v1alpha1: configuration cannot be applied")

// ConfigErrorf is an error marked ErrConfig whose message is the format's
// alone.
func ConfigErrorf(format string, a ...any) error {
	return configError{fmt.Errorf(format, a...)}
}

type configError struct{ err error }

func (e configError) Error() string        { return e.err.Error() }
func (e configError) Unwrap() error        { return e.err }
func (e configError) Is(target error) bool { return target == ErrConfig }
