package limit

import (
	"errors"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
)

const gib = 1 << 30

func TestResolve(t *testing.T) {
	card := []gpu.Device{{Name: "Card", Total: 80 * gib}}
	for _, tc := range []struct {
		text string
		want uint64
		err  string
	}{
		{"", 0, ""},
		{"24GiB", 24 * gib, ""},
		{"50%", 40 * gib, ""},
		{"24XB", 0, `--memory-limit "24XB": unknown unit "XB"`},
		{"81GiB", 0, "is more than the GPU's memory"},
		{"0.5", 0, "--memory-limit 0.5 is a number without a unit"},
		{"24", 0, "--memory-limit 24 is a number without a unit"},
		{" 24 ", 0, "--memory-limit 24 is a number without a unit"},
		{"24KiB", 0, "--memory-limit 24.0 KiB is too small for any GPU program"},
		{"24B", 0, "--memory-limit 24 B is too small"},
		{"255MiB", 0, "is too small"},
		{"256MiB", 256 << 20, ""},
		{"0.0001%", 0, "is too small"},
	} {
		l, err := Parse(tc.text)
		var got uint64
		if err == nil {
			got, err = l.Resolve(card)
		}
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || got != tc.want {
			t.Errorf("%q: %d, %v; want %d, %q", tc.text, got, err, tc.want, tc.err)
		}
	}
}

func TestParseScope(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Scope
		err  string
	}{
		{"process", ScopeProcess, ""},
		{"allocator", ScopeAllocator, ""},
		{"card", "", `--memory-limit-scope "card": not a scope`},
		{"", "", `--memory-limit-scope "": not a scope`},
	} {
		got, err := ParseScope(tc.text)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) || got != tc.want {
			t.Errorf("%q: %q, %v; want %q, %q", tc.text, got, err, tc.want, tc.err)
		}
		if err != nil {
			var ce *hint.ConfigError
			if !errors.As(err, &ce) || hint.Of(err) != "give --memory-limit-scope process or allocator" {
				t.Errorf("%q: %#v, hint %q; want a configuration error with a hint", tc.text, err, hint.Of(err))
			}
		}
	}
}
