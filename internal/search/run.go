package search

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/batchfit/batchfit/internal/memmodel"
)

// Run searches for the largest batch size in cfg's range that fits, trying
// sizes through p. It returns the Result so far with every error: a
// *CrashError when a trial crashed, a *NothingFitsError when even the
// smallest size does not fit, and the cause, wrapped, when the context or
// the Prober ended the search.
//
// The search keeps a bracket: lo, the largest size believed to fit (below
// any flaky size, and any the failures put at risk), and hi, the smallest
// believed not to above it. A planner chooses sizes strictly inside it;
// the search ends when hi is lo's next grid size, or lo is the top.
func Run(ctx context.Context, cfg Config, p Prober) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("invalid search: %w", err)
	}
	d := newDriver(cfg, p)
	if cfg.Strategy == Bisect || cfg.Capacity == 0 {
		d.plan = &bisectPlanner{start: d.startOr(d.g.min)}
	} else {
		// Eight samples: small enough to be cheap and to fit almost
		// anything, large enough that the per-sample cost shows above the
		// allocator's rounding.
		d.plan = &modelPlanner{start: d.startOr(d.g.ceil(8))}
	}
	err := d.run(ctx)
	d.finish()
	return d.res, err
}

type driver struct {
	probing
	cfg    Config
	k      int
	plan   planner
	margin marginPlanner

	res Result
	// belief holds, per size, the observation the search believes: the
	// latest at that size (a re-check's, where one was made). A size can be
	// believed to fit above one believed not to, when a contradiction held;
	// the bracket then lies above both (bracket).
	belief    map[int]Observation
	confirmed map[int]int // passed confirmation runs per size
	// flaky holds the sizes seen both to fit and not to at the boundary
	// (a re-check or a confirmation disagreed): believed not to fit from
	// then on, whatever later trials say, so the answer is the safe side.
	flaky map[int]bool
	// modelDoubted is set when an OOM the model did not expect held on a
	// re-run: the model is wrong about this workload, so its surprise is no
	// reason to re-run later failures.
	modelDoubted bool
}

func newDriver(cfg Config, p Prober) *driver {
	return &driver{
		probing:   probing{p: p, g: cfg.grid(), onEvent: cfg.OnEvent},
		cfg:       cfg,
		k:         max(cfg.Parallel, 1),
		belief:    map[int]Observation{},
		confirmed: map[int]int{},
		flaky:     map[int]bool{},
	}
}

// startOr returns the configured start, on the grid, or def.
func (d *driver) startOr(def int) int {
	if d.cfg.Start != 0 {
		return d.g.clamp(d.g.ceil(d.cfg.Start))
	}
	return d.g.clamp(def)
}

func (d *driver) run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("search stopped: %w", err)
		}
		lo, hi := d.bracket()
		if d.noteRisk(hi) {
			continue
		}
		d.noteBracket(lo, hi)
		if hi == d.g.min {
			return &NothingFitsError{Observation: d.belief[hi]}
		}
		if hi > lo+d.g.step {
			phase := PhaseRefine
			if hi > d.g.max {
				phase = PhaseBracket
			}
			sizes, predicted, rechecks, ok := d.riskEdge(lo, hi)
			if !ok {
				v := d.planView(lo, hi)
				sizes, predicted = d.plan.next(v)
				rechecks = d.proofAlongside(v, sizes)
			}
			if err := d.roundWith(ctx, phase, sizes, predicted, rechecks); err != nil {
				return err
			}
			continue
		}
		// The bracket is closed on lo.
		if sizes, proven := d.proofRecheck(lo, hi); !proven {
			if err := d.recheckProof(ctx, sizes); err != nil {
				return err
			}
			continue
		}
		if n := d.cfg.Confirm - d.confirmed[lo]; n > 0 {
			if err := d.confirm(ctx, lo, min(n, max(d.k, d.cfg.SideBySide))); err != nil {
				return err
			}
			continue
		}
		if mlo, mhi, ok := d.marginBracket(); ok && mhi > mlo+d.g.step {
			sizes, predicted := d.margin.next(d.marginView(mlo, mhi))
			if err := d.round(ctx, PhaseMargin, sizes, predicted); err != nil {
				return err
			}
			continue
		}
		d.res.Found = true
		d.res.Max = lo
		if hi <= d.g.max {
			d.res.FirstFailure = hi
		}
		return nil
	}
}

// bracket returns the largest size believed to fit below every flaky size
// (g.min-step when none) and the smallest believed not to above it
// (g.max+step when none): the highest boundary the trials have found
// below the first size that failed at random. A flaky size bounds the
// answer (the safe side: sizes above it likely fail at random too), but a
// failure below a size that ran, both holding when re-run (a conflict: a
// program that is not monotone, as near its limit fragmentation or a
// per-shape algorithm can make it), does not: a size seen to run twice
// runs, whatever failed below it, so the answer is the boundary above, as
// plain bisection's would be had its path passed there, and the conflict is
// reported.
func (d *driver) bracket() (lo, hi int) {
	return bracketOf(d.belief, d.g, d.top(-1), -1)
}

// bracketOf computes the bracket of beliefs below top, ignoring the size
// skip: top bounds it as a failure would.
func bracketOf(belief map[int]Observation, g grid, top, skip int) (lo, hi int) {
	lo, hi = g.min-g.step, min(top, g.max+g.step)
	for s, o := range belief {
		if s != skip && fits(o) && s > lo && s < top {
			lo = s
		}
	}
	for s, o := range belief {
		if s != skip && tooLarge(o) && s > lo && s < hi {
			hi = s
		}
	}
	return lo, hi
}

// round probes sizes as new trials, then re-checks any result that
// contradicts the others and settles what to believe.
func (d *driver) round(ctx context.Context, phase Phase, sizes []int, predicted float64) error {
	return d.roundWith(ctx, phase, sizes, predicted, nil)
}

// roundWith is round with the proof's rechecks (proofAlongside) run in the
// same Probe call. They are only tallied, as the proof's re-checks are:
// where one disagrees with the new trial at its size, or with what was
// believed of a size the round did not plan (lo, hi), the size is flaky.
func (d *driver) roundWith(ctx context.Context, phase Phase, sizes []int, predicted float64, rechecks []int) error {
	if len(sizes) == 0 {
		// A planner bug must not spin forever.
		return fmt.Errorf("search planner proposed no size inside the bracket")
	}
	clear := d.clearRoom()
	all, err := d.probeWith(ctx, phase, slices.Concat(sizes, rechecks), predicted, false, len(rechecks))
	if err != nil {
		return err
	}
	obs, riders := all[:len(sizes)], all[len(sizes):]
	d.markDisagreeing(obs, riders)
	// A result contradicts when it disagrees with the bracket built from
	// everything else known, this round's other results included. A
	// failure the model did not expect is suspect too when it would move
	// the boundary down.
	trial := maps.Clone(d.belief)
	for _, o := range obs {
		trial[o.Size] = o
	}
	var suspects []Observation
	for _, o := range obs {
		lo, hi := bracketOf(trial, d.g, d.top(o.Size), o.Size)
		contradicts := (tooLarge(o) && o.Size <= lo) || (fits(o) && o.Size >= hi)
		surprise := tooLarge(o) && o.Size < hi && o.Size <= clear
		if contradicts || surprise {
			suspects = append(suspects, o)
			continue
		}
		d.believe(o)
	}
	if len(suspects) == 0 {
		return nil
	}
	again, err := d.rerunSuspects(ctx, suspects, riders)
	if err != nil {
		return err
	}
	var held []int
	for i, o := range suspects {
		// Believe the re-run: if it disagrees, the first result was the
		// flake; if it agrees, both say the same and it stands.
		d.believe(again[i])
		if !agree(o, again[i]) {
			continue
		}
		held = append(held, o.Size)
		if tooLarge(o) && o.Size <= clear {
			d.modelDoubted = true
		}
	}
	for _, s := range held {
		d.recordConflict(s)
	}
	return nil
}

// markDisagreeing marks flaky the sizes that a re-check riding along the
// round (riders) saw otherwise than this round's own result there, or
// than what was believed of it before.
func (d *driver) markDisagreeing(obs, riders []Observation) {
	for _, r := range riders {
		o, known := d.belief[r.Size]
		if i := slices.IndexFunc(obs, func(o Observation) bool { return o.Size == r.Size }); i >= 0 {
			o, known = obs[i], true
		}
		if known && !agree(o, r) {
			d.markFlaky(r.Size)
		}
	}
}

// rerunSuspects returns each suspect's second result, in order: a suspect
// that a re-check beside the round (proofAlongside) ran again has had its
// re-run; the others run again now, as many at once as run side by side.
func (d *driver) rerunSuspects(ctx context.Context, suspects, riders []Observation) ([]Observation, error) {
	again := make([]Observation, len(suspects))
	var recheck, pending []int
	for i, o := range suspects {
		if j := slices.IndexFunc(riders, func(r Observation) bool { return r.Size == o.Size }); j >= 0 {
			again[i] = riders[j]
			continue
		}
		recheck, pending = append(recheck, o.Size), append(pending, i)
	}
	var rerun []Observation
	for chunk := range slices.Chunk(recheck, max(d.k, d.cfg.SideBySide)) {
		r, err := d.probe(ctx, PhaseRecheck, chunk, 0, true)
		if err != nil {
			return nil, err
		}
		rerun = append(rerun, r...)
	}
	for j, i := range pending {
		again[i] = rerun[j]
	}
	return again, nil
}

// believe makes o the belief at its size, unless the size is flaky: then
// it stays believed not to fit.
func (d *driver) believe(o Observation) {
	if d.flaky[o.Size] && fits(o) {
		return
	}
	d.belief[o.Size] = o
}

// clearRoom returns the largest size at which the memory model leaves clear
// room, so that an OOM there is a surprise worth a re-run before it moves
// the boundary: below the smallest boundary the model allows (its
// prediction at the low end of the expected window, less its error bound)
// by a twentieth, and at least a grid step. It is below the grid when there
// is no model, or the model has been wrong about this workload. The model is
// the planner's: once failures that report their figures have moved its
// window, a failure inside the new window is no surprise.
func (d *driver) clearRoom() int {
	none := d.g.min - d.g.step
	if d.modelDoubted || d.cfg.Capacity == 0 || d.cfg.Strategy == Bisect {
		return none
	}
	v := d.planView(d.bracket())
	if v.fit == nil || v.cLo <= 0 {
		return none
	}
	lo := uint64(v.cLo)
	room := v.fit.MaxSize(lo) - v.fit.Bound(lo)
	if math.IsNaN(room) || math.IsInf(room, 0) {
		return none
	}
	room = room*0.95 - float64(d.g.step)
	if room < float64(d.g.min) {
		return none
	}
	return d.g.floor(toInt(room, d.g))
}

// proofAlongside returns the proof's re-checks to run beside a round that
// plans sizes from v, when trials side by side leave room for them
// (Config.ProofAlongside), so that the pair the round closes is proven in
// that round. The round's outcome picks the pair: of lo, the sizes and hi,
// the two grid neighbours where fitting stops. A round that closes the
// bracket whatever it finds (its sizes fill it) proves every pair it may
// close, when room allows; any round proves the pair that a failure's own
// shortfall names (shortfallAnswer: the failure missed by less than a
// sample), when the round can close on it, the failing side as often as
// room allows. A right guess costs no round; a wrong one costs trials that
// ran beside it, and no round.
func (d *driver) proofAlongside(v view, sizes []int) []int {
	room := d.cfg.SideBySide - len(sizes)
	if !d.cfg.ProofAlongside || room < 1 || v.growing() {
		return nil
	}
	ends := slices.Concat([]int{v.lo}, slices.Sorted(slices.Values(sizes)), []int{v.hi})
	var pairs [][2]int
	closes := true
	for i := range len(ends) - 1 {
		a, b := ends[i], ends[i+1]
		if b != a+d.g.step {
			closes = false
		} else if a >= d.g.min {
			pairs = append(pairs, [2]int{a, b})
		}
	}
	if all := d.proving(pairs, sizes); closes && len(all) <= room {
		return all
	}
	s, ok := shortfallAnswer(v)
	if !ok || room < 2 || !slices.Contains(pairs, [2]int{s, s + d.g.step}) {
		return nil
	}
	named := d.proving([][2]int{{s, s + d.g.step}}, sizes)
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
// allocator's whole state (Failure.capturedState): its next failure
// most likely will too, so two alike prove a size (failuresRepeat).
func (d *driver) failuresCaptureState() bool {
	for i := len(d.trials) - 1; i >= 0; i-- {
		if o := d.trials[i]; tooLarge(o) {
			return o.Failure.capturedState()
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
	if hi <= d.g.max && !d.flaky[hi] && !d.atRisk(hi) {
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
	return a.capturedState() && a == b
}

// exactFailure reports whether the last failure at s gave its
// allocator's whole state, so that one more like it proves s
// (failuresRepeat).
func (d *driver) exactFailure(s int) bool {
	for i := len(d.trials) - 1; i >= 0; i-- {
		if o := d.trials[i]; o.Size == s && tooLarge(o) {
			return o.Failure.capturedState()
		}
	}
	return false
}

// uncorroboratedFailures is how often a failure the model cannot vouch
// for must be seen.
const uncorroboratedFailures = 4

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
	if v.fit == nil || v.cHi <= 0 {
		return false
	}
	hi := uint64(v.cHi)
	most := v.fit.MaxSize(hi) + v.fit.Bound(hi)
	return !math.IsNaN(most) && float64(s) > most
}

// recheckProof runs the first round of the proof pair's re-check (as many
// sizes as Parallel, or SideBySide, allows) in fresh trials; the caller reconsiders the
// proof after it, as a repeated failure can settle it early
// (failuresRepeat). A disagreement makes the size flaky: a flaky size is
// not run again, and the proof is reconsidered.
func (d *driver) recheckProof(ctx context.Context, sizes []int) error {
	obs, err := d.probe(ctx, PhaseRecheck, sizes[:min(len(sizes), max(d.k, d.cfg.SideBySide))], 0, true)
	if err != nil {
		return err
	}
	for _, o := range obs {
		if !agree(o, d.belief[o.Size]) {
			d.markFlaky(o.Size)
			continue
		}
		d.believe(o)
	}
	return nil
}

// markFlaky records that size s was seen both to fit and not to, and
// believes its failure.
func (d *driver) markFlaky(s int) {
	d.flaky[s] = true
	if fits(d.belief[s]) {
		for i := len(d.trials) - 1; i >= 0; i-- {
			if o := d.trials[i]; o.Size == s && tooLarge(o) {
				d.belief[s] = o
				return
			}
		}
	}
}

// tally counts the trials at size s that fitted and that did not.
func (d *driver) tally(s int) (ok, failed int) {
	for _, o := range d.trials {
		switch {
		case o.Size != s:
		case fits(o):
			ok++
		case tooLarge(o):
			failed++
		}
	}
	return ok, failed
}

// recordConflict records the contradiction that the size s still makes
// with the nearest belief on the other side.
func (d *driver) recordConflict(s int) {
	o := d.belief[s]
	var c Conflict
	found := false
	for t, other := range d.belief {
		switch {
		case tooLarge(o) && fits(other) && t >= s && (!found || t < c.Ok.Size):
			c, found = Conflict{Ok: other, Fail: o}, true
		case fits(o) && tooLarge(other) && t <= s && (!found || t > c.Fail.Size):
			c, found = Conflict{Ok: o, Fail: other}, true
		}
	}
	if !found {
		return
	}
	for _, e := range d.res.NonMonotonic {
		if e.Ok.Size == c.Ok.Size && e.Fail.Size == c.Fail.Size {
			return
		}
	}
	d.res.NonMonotonic = append(d.res.NonMonotonic, c)
	d.emit(Event{Kind: EventConflict, Conflict: c})
}

// confirm re-runs the answer n times in fresh trials. One failure is enough
// to distrust it: the size is flaky, believed not to fit from then on.
func (d *driver) confirm(ctx context.Context, size, n int) error {
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

// finish fills in the parts of the result that summarise the beliefs.
func (d *driver) finish() {
	d.res.Trials, d.res.Rounds = d.trials, d.rounds
	if r := d.res.Risk; r != nil && d.res.Found && d.res.FirstFailure != r.Size {
		// A size below the risk failed, and its re-checks proved the
		// boundary there (riskEdge's probe can find one): the risk is
		// about sizes above the answer's first failure, no longer its own.
		d.res.Risk = nil
	}
	for _, s := range slices.Sorted(maps.Keys(d.flaky)) {
		ok, failed := d.tally(s)
		d.res.Flaky = append(d.res.Flaky, FlakySize{Size: s, OK: ok, Failed: failed})
	}
	_, hi := d.bracket()
	fig, points := d.points(hi)
	d.res.Figure = fig
	if f, err := memmodel.Estimate(points); err == nil {
		d.res.Model = &f
	}
	if mlo, mhi, ok := d.marginBracket(); ok && d.res.Found && mhi == mlo+d.g.step && mlo >= d.g.min {
		d.res.Margin = mlo
	}
}

// points returns the memory figure and the measured peaks of the sizes
// believed to fit below hi.
func (d *driver) points(hi int) (Figure, []memmodel.Point) {
	var oks []Observation
	for s, o := range d.belief {
		if fits(o) && s < hi {
			oks = append(oks, o)
		}
	}
	slices.SortFunc(oks, func(a, b Observation) int { return a.Size - b.Size })
	fig := chooseFigure(oks)
	if fig == FigureNone {
		return fig, nil
	}
	points := make([]memmodel.Point, len(oks))
	for i, o := range oks {
		points[i] = memmodel.Point{Size: o.Size, Bytes: fig.of(o.Memory)}
	}
	return fig, points
}

// marginLimit is the peak, in units of the memory figure, that leaves
// MarginPercent of the capacity free.
func (d *driver) marginLimit() float64 {
	capacity, _ := d.capacity()
	return float64(capacity) * (1 - d.cfg.MarginPercent/100)
}

// capacity is the memory a trial's peak must fit in: Capacity, or the
// smallest pool limit a trial's framework reported when that is less (JAX's
// pool is 75 % of the card by default). pooled says it is such a limit: a
// framework's own pool lies outside the CUDA context, as an allocator cap
// does.
func (d *driver) capacity() (capacity uint64, pooled bool) {
	capacity = d.cfg.Capacity
	for _, o := range d.belief {
		if l := o.Memory.Limit; l > 0 && (capacity == 0 || l < capacity) {
			capacity, pooled = l, true
		}
	}
	return capacity, pooled
}

// marginBracket returns the margin's bracket: mlo, the largest size below
// mhi whose measured peak is within the limit (g.min-step when none), and
// mhi, the smallest size that does not fit or whose peak is above it. ok is
// false when no margin was asked for or it cannot be measured.
func (d *driver) marginBracket() (mlo, mhi int, ok bool) {
	if d.cfg.MarginPercent <= 0 {
		return 0, 0, false
	}
	_, hi := d.bracket()
	fig, _ := d.points(hi)
	if fig == FigureNone {
		return 0, 0, false
	}
	limit := d.marginLimit()
	mhi = hi
	for s, o := range d.belief {
		// A size that failed below the answer (a conflict that held)
		// bounds the margin too: a size with room to spare must not lie
		// above one that does not run.
		over := fits(o) && float64(fig.of(o.Memory)) > limit
		if s < mhi && (over || tooLarge(o)) {
			mhi = s
		}
	}
	mlo = d.g.min - d.g.step
	for s, o := range d.belief {
		if fits(o) && s < mhi && s > mlo {
			mlo = s
		}
	}
	return mlo, mhi, true
}

// view shows the planner the bracket (lo, hi) and the model.
func (d *driver) view(lo, hi int) view {
	v := view{g: d.g, k: d.k, lo: lo, hi: hi}
	v.fig, v.points = d.points(hi)
	if f, err := memmodel.Estimate(v.points); err == nil {
		v.fit = &f
		v.growth = d.reservedSlope(hi, f.Slope)
	}
	capacity, pooled := d.capacity()
	v.pooled = pooled
	context := 0.0
	if !pooled {
		context = d.context(hi)
	}
	v.cLo, v.cHi = expectedPeak(capacity, v.fig, context)
	return v
}

// reservedSlope is the slope of the reserved peaks of the sizes believed
// to fit below hi, or def when some size reports none or they do not grow
// (a framework's preallocated pool).
func (d *driver) reservedSlope(hi int, def float64) float64 {
	var pts []memmodel.Point
	for s, o := range d.belief {
		if !fits(o) || s >= hi {
			continue
		}
		if o.Memory.Reserved == 0 {
			return def
		}
		pts = append(pts, memmodel.Point{Size: s, Bytes: o.Memory.Reserved})
	}
	if f, err := memmodel.Estimate(pts); err == nil {
		return f.Slope
	}
	return def
}

// context is what the capacity loses outside the allocator's figures: 0
// under an allocator cap, else NVML's peak less the reserved peak of the
// same trial (the CUDA context), the least seen; -1 when unknown.
func (d *driver) context(hi int) float64 {
	if d.cfg.AllocatorCap {
		return 0
	}
	ctx := -1.0
	for s, o := range d.belief {
		m := o.Memory
		if fits(o) && s < hi && m.Device > m.Reserved && m.Reserved > 0 {
			if c := float64(m.Device - m.Reserved); ctx < 0 || c < ctx {
				ctx = c
			}
		}
	}
	return ctx
}

// marginView shows the margin planner its bracket, with the margin limit
// as the expected peak.
func (d *driver) marginView(mlo, mhi int) view {
	// Fit on every size that ran: the peaks above the limit help place it.
	v := d.view(d.bracket())
	v.lo, v.hi = mlo, mhi
	v.cLo, v.cHi = d.marginLimit(), d.marginLimit()
	return v
}
