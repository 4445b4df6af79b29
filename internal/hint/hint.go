// Package hint carries a suggestion for the user with an error. An error
// has one when it, or an error it wraps, has a Hint() string method; main
// prints the first non-empty one as "batchfit: hint: …". A ConfigError
// also says the configuration is at fault, which main reports as a usage
// error.
package hint

import (
	"errors"
	"fmt"
)

// hinted is an error with a suggestion for the user.
type hinted struct {
	err  error
	hint string
}

func (e *hinted) Error() string { return e.err.Error() }
func (e *hinted) Unwrap() error { return e.err }
func (e *hinted) Hint() string  { return e.hint }

// With returns err with hint, which says what to do about it; errors.Is
// and errors.As see through it.
func With(err error, hint string) error { return &hinted{err: err, hint: hint} }

// Errorf is With(fmt.Errorf(format, args...), hint).
func Errorf(hint, format string, args ...any) error {
	return With(fmt.Errorf(format, args...), hint)
}

// Of returns the first non-empty hint anywhere in err's chain, "" when
// there is none.
func Of(err error) string {
	type hinter interface{ Hint() string }
	for err != nil {
		var h hinter
		if !errors.As(err, &h) {
			return ""
		}
		if hint := h.Hint(); hint != "" {
			return hint
		}
		err = errors.Unwrap(h.(error))
	}
	return ""
}

// ConfigError is a run that cannot go ahead as configured (bad bounds, a
// --gpus list, a --log-dir or a limit the GPU cannot hold); nothing ran.
// The CLI reports it as a usage error.
type ConfigError struct {
	Err  error
	hint string
}

// Configf returns a *ConfigError of fmt.Errorf(format, args...) with hint.
func Configf(hint, format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...), hint: hint}
}

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Hint says how to fix the configuration.
func (e *ConfigError) Hint() string { return e.hint }
