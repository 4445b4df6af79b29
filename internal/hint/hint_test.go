package hint

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type hintErr struct{ hint string }

func (e hintErr) Error() string { return "inner" }
func (e hintErr) Hint() string  { return e.hint }

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"none", errors.New("disk full"), ""},
		{"nil", nil, ""},
		{"with", With(errors.New("no sbatch"), "install Slurm"), "install Slurm"},
		{"errorf", Errorf("list each GPU once", "GPU %d is listed twice", 1), "list each GPU once"},
		{"config", fmt.Errorf("check: %w", Configf("pass a --log-dir you can write to", "--log-dir x: denied")), "pass a --log-dir you can write to"},
		// A hint deep in the chain is found past wrappers without one.
		{"deep", fmt.Errorf("start trial 1: %w", hintErr{"install Slurm"}), "install Slurm"},
		{"empty skipped", With(hintErr{"the inner one"}, ""), "the inner one"},
		{"outer first", With(hintErr{"inner"}, "outer"), "outer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.err); got != tc.want {
				t.Errorf("Of = %q, want %q", got, tc.want)
			}
		})
	}
	err := With(fmt.Errorf("probe: %w", context.Canceled), "x")
	if !errors.Is(err, context.Canceled) || err.Error() != "probe: context canceled" {
		t.Errorf("With hides its error: %v", err)
	}
}

func TestConfigError(t *testing.T) {
	err := fmt.Errorf("prepare: %w", Configf("fix it", "--steps %d", -1))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Error() != "--steps -1" || ce.Hint() != "fix it" {
		t.Errorf("err = %v, want a ConfigError %q with hint %q", err, "--steps -1", "fix it")
	}
}
