package search

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/batchfit/batchfit/internal/search/plan"
)

// proofAlongside returns the proof's re-checks to run beside a round that
// plans sizes from v, when trials side by side leave room for them
// (Config.ProofAlongside), so that the pair the round closes is proven in
// that round. The round's outcome picks the pair: of lo, the sizes and hi,
// the two grid neighbours where fitting stops. A round that closes the
// bracket whatever it finds (its sizes fill it) proves every pair it may
// close, when room allows; any round proves the pair that a failure's own
// shortfall names (plan.ShortfallAnswer: the failure missed by less than a
// sample), when the round can close on it, the failing side as often as
// room allows. A right guess costs no round; a wrong one costs trials that
// ran beside it, and no round.
func (d *driver) proofAlongside(v plan.View, sizes []int) []int {
	room := d.cfg.SideBySide - len(sizes)
	if !d.cfg.ProofAlongside || d.cfg.Unproven || room < 1 || v.Growing() {
		return nil
	}
	ends := slices.Concat([]int{v.Lo}, slices.Sorted(slices.Values(sizes)), []int{v.Hi})
	var pairs [][2]int
	closes := true
	for i := range len(ends) - 1 {
		a, b := ends[i], ends[i+1]
		if b != a+d.g.Step {
			closes = false
		} else if a >= d.g.Min {
			pairs = append(pairs, [2]int{a, b})
		}
	}
	if all := d.proving(pairs, sizes); closes && len(all) <= room {
		return all
	}
	s, ok := plan.ShortfallAnswer(v)
	if !ok || room < 2 || !slices.Contains(pairs, [2]int{s, s + d.g.Step}) {
		return nil
	}
	named := d.proving([][2]int{{s, s + d.g.Step}}, sizes)
	return named[:min(len(named), room)]
}

// proving returns the re-checks that prove each of pairs (a fits, the
// grid size above it does not) once a round of sizes has run, if its
// outcome closes the bracket on that pair: a until it was seen to fit
// twice, the failing side until it failed as often as failuresToProve
// asks, as proofRecheck would ask for them after the round. A size in two
// pairs (a failure in one, the fitting side in the next) is re-run as
// often as the more demanding asks: whichever way it comes out, its runs
// count for the pair its outcome closes. Sizes come in increasing order,
// the fitting side of each pair first.
func (d *driver) proving(pairs [][2]int, sizes []int) []int {
	need := map[int]int{}
	for _, p := range pairs {
		a, b := p[0], p[1]
		ok, _ := d.tally(a)
		if slices.Contains(sizes, a) {
			ok++
		}
		need[a] = max(need[a], 2-ok)
		need[b] = max(need[b], d.failuresWanted(b, slices.Contains(sizes, b)))
	}
	var out []int
	for _, s := range slices.Sorted(maps.Keys(need)) {
		out = append(out, slices.Repeat([]int{s}, max(need[s], 0))...)
	}
	return out
}

// failuresWanted is how many more failures at s its proof may ask for,
// once a round in which s runs (planned) has run: none when s was seen to
// fit (it is flaky) or is flaky already, else what failuresToProve asks
// beyond those seen, but at most two in all while failures capture their
// allocator's state (failuresRepeat: a second to the byte proves it).
func (d *driver) failuresWanted(s int, planned bool) int {
	ok, failed := d.tally(s)
	if ok > 0 || d.flaky[s] {
		return 0
	}
	if planned {
		failed++
	}
	n := d.failuresToProve(s) - failed
	if failed < 2 && d.failuresCaptureState() {
		n = min(n, 2-failed)
	}
	return max(n, 0)
}

// failuresCaptureState says whether the workload's last failure gave its
// allocator's whole state (capturedState): its next failure
// most likely will too, so two alike prove a size (failuresRepeat).
func (d *driver) failuresCaptureState() bool {
	for i := len(d.trials) - 1; i >= 0; i-- {
		if o := d.trials[i]; tooLarge(o) {
			return capturedState(o.Failure)
		}
	}
	return false
}

// proofRecheck says whether the proof pair (lo ran, hi did not; hi above
// the grid when lo is the top) is proven, and otherwise returns the sizes
// that must run again in fresh trials before the answer is reported: lo
// until it was seen to fit twice, hi until it was seen to fail as often as
// failuresToProve asks, every time the same way. A side that was seen both
// ways is flaky: it is marked, believed not to fit, and not re-run; when
// that is lo, the bracket has moved and no size is returned.
func (d *driver) proofRecheck(lo, hi int) (sizes []int, proven bool) {
	okLo, failLo := d.tally(lo)
	if failLo > 0 {
		d.markFlaky(lo)
		return nil, false
	}
	if okLo < 2 {
		sizes = append(sizes, lo)
	}
	if hi <= d.g.Max && !d.flaky[hi] && !d.atRisk(hi) {
		okHi, failHi := d.tally(hi)
		if okHi > 0 {
			d.markFlaky(hi)
		} else if n := d.failuresToProve(hi) - failHi; n > 0 {
			if failHi == 1 && d.exactFailure(hi) {
				// One more failure to the byte proves it (failuresRepeat):
				// ask for that one first, not for all a random OOM needs.
				n = 1
			}
			sizes = append(sizes, slices.Repeat([]int{hi}, n)...)
		}
	}
	return sizes, len(sizes) == 0
}

// failuresToProve is how many times the proof's failing side hi must be
// seen failing before it is believed. A trainer can run out of memory at
// random near its limit (p = 20 % of the time, say): a size that fits but
// failed twice (p², 4 % of the sizes near the limit that are tried) would
// be reported as exact and wrong. So twice is enough only when the memory
// model rules out that hi fits; otherwise it takes uncorroboratedFailures
// (p⁴, 0.16 %).
func (d *driver) failuresToProve(hi int) int {
	if d.modelRulesOut(hi) || d.failuresRepeat(hi) {
		return 2
	}
	return uncorroboratedFailures
}

// uncorroboratedFailures is how often a failure the model cannot vouch
// for must be seen.
const uncorroboratedFailures = 4

// failuresRepeat reports whether the last two failures at s were the same
// out-of-memory error to the byte: the size asked for, what the allocator
// held and had reserved, from its own counters (Failure.Exact; a message's
// figures are rounded to 10 MiB), and what it could still take. An
// allocator decides from that state alone, so the same state failing twice
// is no accident of timing; a failure at random near the limit
// (fragmentation, a varying allocation) leaves other figures each time.
func (d *driver) failuresRepeat(s int) bool {
	var seen []Failure
	for _, o := range d.trials {
		if o.Size == s && tooLarge(o) {
			seen = append(seen, o.Failure)
		}
	}
	n := len(seen)
	if n < 2 {
		return false
	}
	a, b := seen[n-2], seen[n-1]
	return capturedState(a) && a == b
}

// exactFailure reports whether the last failure at s gave its
// allocator's whole state, so that one more like it proves s
// (failuresRepeat).
func (d *driver) exactFailure(s int) bool {
	for i := len(d.trials) - 1; i >= 0; i-- {
		if o := d.trials[i]; o.Size == s && tooLarge(o) {
			return capturedState(o.Failure)
		}
	}
	return false
}

// modelRulesOut reports whether the memory model says size s cannot fit:
// it lies above the largest size the model allows (its prediction at the
// high end of the expected window, plus its error bound), the model has
// not been wrong about this workload, and nothing at s or above was seen
// to fit.
func (d *driver) modelRulesOut(s int) bool {
	if d.modelDoubted || d.cfg.Capacity == 0 {
		return false
	}
	for _, o := range d.trials {
		if o.Size >= s && fits(o) {
			return false
		}
	}
	v := d.view(d.bracket())
	if v.Fit == nil || v.PeakHi <= 0 {
		return false
	}
	hi := uint64(v.PeakHi)
	most := v.Fit.MaxSize(hi) + v.Fit.Bound(hi)
	return !math.IsNaN(most) && float64(s) > most
}

// recheckProof runs the first round of the proof pair's re-check (as many
// sizes as Parallel, or SideBySide, allows) in fresh trials; the caller reconsiders the
// proof after it, as a repeated failure can settle it early
// (failuresRepeat). A disagreement makes the size flaky: a flaky size is
// not run again, and the proof is reconsidered.
func (d *driver) recheckProof(ctx context.Context, sizes []int) error {
	d.proofRounds++
	obs, err := d.probe(ctx, PhaseRecheck, sizes[:min(len(sizes), max(d.k, d.cfg.SideBySide))], 0, true)
	if err != nil {
		return err
	}
	for _, o := range obs {
		if !agree(o, d.belief[o.Size]) && !d.fromPrior[o.Size] {
			d.markFlaky(o.Size)
			continue
		}
		d.believe(o) // a Prior failure gives way to a trial of this kind
	}
	return nil
}

// confirm re-runs the answer n times in fresh trials. One failure is enough
// to distrust it: the size is flaky, believed not to fit from then on.
func (d *driver) confirm(ctx context.Context, size, n int) error {
	d.proofRounds++
	obs, err := d.probe(ctx, PhaseConfirm, slices.Repeat([]int{size}, n), 0, true)
	if err != nil {
		return err
	}
	for _, o := range obs {
		if fits(o) {
			d.confirmed[size]++
			continue
		}
		d.markFlaky(size)
		return nil
	}
	return nil
}

// capturedState reports whether f is an allocator's whole state when it
// refused, to the byte: what it asked for, held and had reserved, from its
// own counters, and what it could still take: the cap's room, or, with no
// cap, the device's free memory. Such a state decides the failure alone, so
// the same state twice is no accident (driver.failuresRepeat): a failure at
// random near the limit (fragmentation, a varying allocation, another
// process's memory) leaves other figures.
// docs/design/proof-and-flaky-boundaries.md has the measurements.
func capturedState(f Failure) bool {
	return f.Exact && f.Request > 0 && f.Allocated > 0 && f.Reserved > 0 && (f.Capped || f.Free > 0)
}
