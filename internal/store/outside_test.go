package store

import (
	"context"
	"testing"
)

// What a machine's trials held outside the allocator is kept per machine,
// the latest run's figure in place of the one before.
func TestOutside(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	h200 := Machine{GPU: "NVIDIA H200", Driver: "580.95", Framework: "auto: torch 2.11.0"}
	l4 := Machine{GPU: "NVIDIA L4", Driver: "580.95", Framework: "auto: torch 2.11.0"}
	if n, err := s.Outside(ctx, h200); n != 0 || err != nil {
		t.Fatalf("Outside of an empty history = %d, %v", n, err)
	}
	for _, n := range []uint64{600 << 20, 650 << 20} {
		if err := s.NoteOutside(ctx, h200, n); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Outside(ctx, h200); n != 650<<20 || err != nil {
		t.Errorf("Outside = %d, %v; want the latest, 650 MiB", n, err)
	}
	if n, _ := s.Outside(ctx, l4); n != 0 {
		t.Errorf("another GPU's Outside = %d, want 0", n)
	}
}
