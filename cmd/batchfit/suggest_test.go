package main

import (
	"slices"
	"testing"
)

func TestSuggest(t *testing.T) {
	flags := []string{"memory-limit", "memory-limit-scope", "max", "min", "steps", "start", "json", "strategy"}
	for _, c := range []struct {
		typed string
		want  []string
	}{
		{"memory-limt", []string{"memory-limit"}},
		{"memroy-limit", []string{"memory-limit"}},
		{"Memory-Limit", []string{"memory-limit"}},
		{"mem", []string{"memory-limit", "memory-limit-scope"}},
		{"stps", []string{"steps"}},
		{"mxa", []string{"max"}},
		{"jsn", []string{"json"}},
		{"frobnicate", nil},
		{"x", nil},
	} {
		if got := suggest(c.typed, flags); !slices.Equal(got, c.want) {
			t.Errorf("suggest(%q) = %q, want %q", c.typed, got, c.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "abc", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"steps", "stps", 1},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
