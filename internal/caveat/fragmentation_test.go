package caveat

import (
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/record"
)

// The failures of the H200's zoo searches (bench/results/zoo-h200.txt),
// to the byte: the LM on the whole card and
// the HF Trainer under a 24 GiB cap failed with memory to spare in pieces;
// SimCLR and Lightning did not (too little to spare, or none).
func TestFragmentationWarning(t *testing.T) {
	const card, cap24 = 150754820096, 25769803776
	oom := func(size int, request, allocated, reserved, free uint64, capped, exact bool) record.Trial {
		return record.Trial{Size: size, OOM: &record.OOMFigures{Request: request, Allocated: allocated, Reserved: reserved,
			Free: free, Capped: capped, Exact: exact}}
	}
	for _, tc := range []struct {
		name     string
		trial    record.Trial
		capacity uint64
		want     string
	}{
		{"LM, whole card", oom(151, 19792920576, 111748306432, 130830827520, 18474991616, false, true), card,
			"the first failure, at 151, asked for 18.43 GiB with 34.98 GiB free in all (17.77 GiB reserved by PyTorch but unallocated, 17.21 GiB more it could take), but not in one piece"},
		{"HF, 24 GiB", oom(72, 4718592000, 18981691392, 23261609984, 2400819610, true, true), cap24, "at 72, asked for 4.39 GiB"},
		{"HF, whole card", oom(425, 27854372864, 107708827648, 135285178368, 14020640768, false, true), card, "at 425"},
		{"SimCLR, 24 GiB: 0.12 GiB to spare", oom(283, 71303168, 25465368576, 25652363264, 10066330, true, true), cap24, ""},
		{"Lightning, 24 GiB: too little", oom(2004, 207618048, 25523230208, 25656557568, 5872026, true, true), cap24, ""},
		{"SimCLR, whole card", oom(1678, 421527552, 148638879232, 149071855616, 231866368, false, true), card, ""},
		{"a message's rounded figures", oom(151, 19792920576, 111748306432, 130830827520, 18474991616, false, false), card, ""},
	} {
		got := Fragmentation([]record.Trial{{Size: tc.trial.Size - 1}, tc.trial}, tc.trial.Size, tc.capacity)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	lm := oom(151, 19792920576, 111748306432, 130830827520, 18474991616, false, true)
	t.Setenv("PYTORCH_CUDA_ALLOC_CONF", "")
	if got := Fragmentation([]record.Trial{lm}, 151, card); !strings.HasSuffix(got, "expandable_segments:True may fit more") {
		t.Errorf("no tip: %q", got)
	}
	t.Setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
	if got := Fragmentation([]record.Trial{lm}, 151, card); strings.Contains(got, "expandable") || got == "" {
		t.Errorf("with expandable segments set: %q", got)
	}
}
