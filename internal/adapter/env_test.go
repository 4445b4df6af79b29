package adapter

import (
	"math"
	"slices"
	"testing"
)

func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name               string
		base               []string
		pythonPath, report string
		want               []string
	}{
		{
			name:       "no user path",
			base:       []string{"HOME=/h", "PATH=/bin"},
			pythonPath: "/a/batchfit/_hook:/a", report: "/r.jsonl",
			want: []string{"HOME=/h", "PATH=/bin", "PYTHONPATH=/a/batchfit/_hook:/a", "BATCHFIT_REPORT=/r.jsonl"},
		},
		{
			name:       "user path kept after ours",
			base:       []string{"PYTHONPATH=/mine:/other", "HOME=/h"},
			pythonPath: "/a/batchfit/_hook:/a", report: "/r.jsonl",
			want: []string{"HOME=/h", "PYTHONPATH=/a/batchfit/_hook:/a:/mine:/other", "BATCHFIT_REPORT=/r.jsonl"},
		},
		{
			name:       "empty user path adds no empty entry",
			base:       []string{"PYTHONPATH="},
			pythonPath: "/a", report: "/r",
			want: []string{"PYTHONPATH=/a", "BATCHFIT_REPORT=/r"},
		},
		{
			name:       "last duplicate wins and old report replaced",
			base:       []string{"PYTHONPATH=/first", "BATCHFIT_REPORT=/old", "PYTHONPATH=/last"},
			pythonPath: "/a", report: "/new",
			want: []string{"PYTHONPATH=/a:/last", "BATCHFIT_REPORT=/new"},
		},
		{
			name: "no report file silences the hook",
			base: []string{"BATCHFIT_REPORT=/old", "PYTHONPATH=/mine"},
			want: []string{"PYTHONPATH=/mine"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := slices.Clone(tc.base)
			got := Env(base, tc.pythonPath, tc.report)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Env = %q, want %q", got, tc.want)
			}
			if !slices.Equal(base, tc.base) {
				t.Errorf("Env changed its input: %q", base)
			}
		})
	}
}

func TestMergeAllocConf(t *testing.T) {
	for _, tc := range []struct {
		existing string
		fraction float64
		want     string
	}{
		{"", 0.1729, "per_process_memory_fraction:0.1729"},
		{"expandable_segments:True", 0.5, "expandable_segments:True,per_process_memory_fraction:0.5"},
		{"max_split_size_mb:128, per_process_memory_fraction:0.9 ,garbage_collection_threshold:0.6", 0.25,
			"max_split_size_mb:128,garbage_collection_threshold:0.6,per_process_memory_fraction:0.25"},
		{"per_process_memory_fraction:0.9,,", 1, "per_process_memory_fraction:1"},
		// Full precision: 24 GiB of a 139.8 GiB card.
		{"", 24.0 / 139.8, "per_process_memory_fraction:0.17167381974248927"},
		// No cap asked: the user's setting stays.
		{"per_process_memory_fraction:0.9", 0, "per_process_memory_fraction:0.9"},
		{"a:1", 1.5, "a:1"},
		{"a:1", math.NaN(), "a:1"},
		{"a:1", -0.1, "a:1"},
	} {
		if got := MergeAllocConf(tc.existing, tc.fraction); got != tc.want {
			t.Errorf("MergeAllocConf(%q, %v) = %q, want %q", tc.existing, tc.fraction, got, tc.want)
		}
	}
}

// A trial whose allocator kept another cap than the one batchfit set (the
// program set its own, or torch read the variable before the trial set it)
// is named; the cap it was set, or no figure, is no news.
func TestCapNotHeld(t *testing.T) {
	env := []string{AllocConfEnv + "=expandable_segments:True,per_process_memory_fraction:0.1709385063747209"}
	for _, c := range []struct {
		env  []string
		got  float64
		want bool
	}{
		{env, 0.1709385063747209, false},
		{env, 0, false}, // not reported (no CUDA, an older torch)
		{nil, 1, false}, // no cap set
		{env, 1, true},  // uncapped: read before the trial set it
		{env, 0.05, true},
	} {
		why := CapNotHeld(c.env, Summary{MaxMemoryFraction: c.got})
		if (why != "") != c.want {
			t.Errorf("CapNotHeld(%q, %g) = %q, want a reason: %v", c.env, c.got, why, c.want)
		}
	}
}
