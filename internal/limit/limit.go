// Package limit is --memory-limit, the memory of an emulated smaller card:
// read from the flags (a GPU by name, a size or a share of the GPU, and
// what it holds) and resolved against the GPU to bytes.
package limit

import (
	"fmt"
	"strings"

	"github.com/batchfit/batchfit/internal/cards"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/units"
)

// Limit is --memory-limit as given: a size in bytes, a share of the GPU, or
// a card by name (Bytes then its memory, Card the card). The zero Limit is
// no limit.
type Limit struct {
	Bytes   uint64
	Percent float64
	Card    *cards.Card
}

// Scope is what a memory limit holds (--memory-limit-scope), as recorded
// in record.Settings.MemoryLimitScope. The zero Scope is ScopeProcess.
type Scope string

// The scopes of a memory limit.
const (
	// ScopeProcess holds the whole process, CUDA context included, as a
	// real card does.
	ScopeProcess Scope = record.ScopeProcess
	// ScopeAllocator holds only the framework's allocator, as
	// PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction does.
	ScopeAllocator Scope = record.ScopeAllocator
)

// ParseScope reads --memory-limit-scope: "process" or "allocator".
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeProcess, ScopeAllocator:
		return sc, nil
	}
	return "", hint.Configf("give --memory-limit-scope process or allocator", "--memory-limit-scope %q: not a scope", s)
}

// Usage is the help of --memory-limit, the same for every command, for
// one whose limit holds scope (a search's by default, a doctor run's
// always allocator).
func Usage(scope Scope) string {
	held := "the whole process"
	if scope == ScopeAllocator {
		held = "the framework's allocator only"
	}
	return "emulate a smaller card, held for " + held + ": a GPU by name (l4, t4, a10g, rtx4090, a100-40gb, a100-80gb, h100-80gb, ...: batchfit cards), a size (24GiB; GB means GiB, as GPU makers use it) or a share of the GPU (80%)"
}

var parseHint = "give --memory-limit as a GPU (" + strings.Join(cards.Names(), ", ") +
	"), a size (24GiB; GB means GiB, as on GPU boxes) or a share of the GPU (80%)"

// Min is the smallest memory limit batchfit accepts. Less than this
// holds no training program (the CUDA context alone takes 0.3-0.75 GiB), so
// a smaller limit is a typing mistake, and searching under it would end in
// a misleading "nothing fits".
const Min = 256 << 20

// Parse reads --memory-limit: "l4", "a100-40gb", "24GiB", "24GB",
// "80%"; "" is none. A bare number is refused: "24" could mean bytes, GiB
// or a share, and "0.5" would otherwise read as no limit at all.
func Parse(s string) (Limit, error) {
	if s == "" {
		return Limit{}, nil
	}
	if c, ok := cards.Lookup(s); ok {
		// What a CUDA process there can have: a held card leaves exactly
		// that, and a capped trial is held to it.
		return Limit{Bytes: c.Usable(), Card: &c}, nil
	}
	t := strings.TrimSpace(s)
	if t != "" && strings.Trim(t, "0123456789.") == "" {
		return Limit{}, hint.Configf(fmt.Sprintf("write %sGiB for a size, %s%% for a share of the GPU, or a GPU's name (batchfit cards)", t, t),
			"--memory-limit %s is a number without a unit", t)
	}
	b, p, err := units.ParseSize(s)
	if err != nil {
		if t != "" && (t[0] < '0' || t[0] > '9') && t[0] != '.' {
			err = fmt.Errorf("not a GPU batchfit knows")
		}
		return Limit{}, hint.Configf(parseHint, "--memory-limit %q: %v", s, err)
	}
	if p == 0 && b < Min {
		return Limit{}, tooSmall(b)
	}
	return Limit{Bytes: b, Percent: p}, nil
}

// tooSmall is the error for a limit below Min.
func tooSmall(b uint64) error {
	return hint.Configf(fmt.Sprintf("a GPU program needs %s at least; give the card's memory, such as 24GiB", units.Bytes(Min)),
		"--memory-limit %s is too small for any GPU program", units.Bytes(b))
}

// IsZero reports whether l is no limit.
func (l Limit) IsZero() bool { return l.Bytes == 0 && l.Percent == 0 }

// Resolve returns the limit in bytes on the first of devices, 0 for none.
func (l Limit) Resolve(devices []gpu.Device) (uint64, error) {
	if l.IsZero() {
		return 0, nil
	}
	if len(devices) == 0 {
		return 0, hint.Configf("--memory-limit needs the GPU's total memory, read through the NVIDIA driver; run where the driver is installed", "--memory-limit: no GPU found")
	}
	total := devices[0].Total
	bytes := l.Bytes
	if l.Percent > 0 {
		bytes = uint64(float64(total) * l.Percent / 100)
	}
	if bytes < Min {
		return 0, tooSmall(bytes)
	}
	if bytes > total {
		return 0, hint.Configf(fmt.Sprintf("%s has %s; choose a smaller limit", devices[0].Name, units.Bytes(total)),
			"--memory-limit %s is more than the GPU's memory", units.Bytes(bytes))
	}
	return bytes, nil
}
