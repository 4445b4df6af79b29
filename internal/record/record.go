// Package record defines the record of one search run: its facts, every
// trial and the answer. It is what --json prints, what the store keeps and
// what reports draw, so all three agree on one shape.
package record

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpu"
)

// Status is where a run stands.
type Status string

// Run statuses. A run is "running" while it is stored as it happens; one that
// stays "running" after its process died is shown as interrupted.
const (
	Running     Status = "running"
	Found       Status = "found"
	NothingFits Status = "nothing_fits"
	Failed      Status = "failed"      // a crash or an error stopped it
	Interrupted Status = "interrupted" // canceled (Ctrl-C) or killed
)

// Run is one batchfit search, as recorded.
type Run struct {
	ID          string    `json:"id"`
	Fingerprint string    `json:"fingerprint"`
	Status      Status    `json:"status"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Seconds     float64   `json:"seconds"`

	Command   []string `json:"command"` // with the {} placeholder kept
	Dir       string   `json:"dir"`
	Simulated bool     `json:"simulated"`
	Settings  Settings `json:"settings"`
	GPU       *GPUInfo `json:"gpu"`
	Torch     string   `json:"torch"` // version the adapter reported
	Version   string   `json:"batchfit_version"`

	Answer       int `json:"answer"`        // 0 when nothing fits or not found
	FirstFailure int `json:"first_failure"` // the failing size that proves the answer
	Margin       int `json:"-"`             // the --margin answer, in JSON as one of "margins"
	// Recommended is the size to train at for speed, from --throughput's
	// measurements (Throughput.Recommended); 0 when not measured.
	Recommended int `json:"recommended"`
	// GlobalBatch is how to train at --global-batch with the answer.
	GlobalBatch *GlobalBatch `json:"global_batch"`
	Trials      []Trial      `json:"trials"`
	// Rounds are the rounds the trials took, the proof's included: the
	// trials of a round run at once, so rounds are what a search waits for.
	// ProofRounds are those that only proved the answer once the search had
	// found it (on a held card, a round a trial). The re-checks, the proof's
	// and any other, are the trials marked Retry.
	Rounds       int    `json:"rounds"`
	ProofRounds  int    `json:"proof_rounds"`
	NonMonotonic []Pair `json:"non_monotonic"`
	// Flaky lists the sizes at the boundary whose trials disagreed. When
	// set, Answer is the safe side below them, not exact, and the run is
	// never answered from the cache.
	Flaky []FlakySize `json:"flaky"`
	// AtRisk, when set, says that the failures' own figures put sizes from
	// AtRisk.Size up at risk (a framework's pool: XLA's): Answer is the
	// safe side below them, not exact, and the run is never answered from
	// the cache.
	AtRisk *Risk  `json:"at_risk"`
	Model  *Model `json:"model"`
	Error  string `json:"error"`
	LogDir string `json:"log_dir"`
	Cached bool   `json:"cached"` // answered from the store
	// CachedFrom is the run a cached answer came from.
	CachedFrom string   `json:"cached_from"`
	Warnings   []string `json:"warnings"`
	// InputShapes say what the trials met of batch shapes that vary; nil
	// when no trial saw them vary.
	InputShapes *InputShapes `json:"input_shapes"`
	// Proof says how the answer's proof ran under --memory-limit:
	// ProofHeld on a held card, ProofCapped in trials capped to the
	// limit; "" without a limit.
	Proof string `json:"proof"`
	// Pool is the framework's own memory pool under --memory-limit, as
	// the named card gives it (XLA's); nil when the trials kept none.
	Pool *Pool `json:"pool"`
	// Soaks are the --soak runs of the answer, in order: one that ran out
	// of memory moved the answer down and the next soaked the new one.
	Soaks []Soak `json:"soaks"`
	// Throughput is what --throughput measured; nil without it.
	Throughput *Throughput `json:"throughput"`
	// Inputs are what ran, beyond the command line and the settings: a
	// cached answer is used only while they are unchanged.
	Inputs *Inputs `json:"inputs"`
}

// Inputs are what a run's answer depends on besides its command line and
// settings. Files, Executable, Git and Env are known before the first trial
// and are part of the fingerprint; Loaded and Opened are only known once a
// trial has run, so they are checked again (hashed anew) before a cached
// answer is used.
type Inputs struct {
	Files []File `json:"files"` // files named in the command's arguments
	// Executable is the program the command runs, as execvp finds it in
	// the trials' PATH (a name with a slash as given), and its hash; nil
	// when it cannot be found.
	Executable *File    `json:"executable"`
	Git        *Git     `json:"git"` // nil outside a git repository or without git
	Env        []string `json:"env"` // memory-relevant NAME=VALUE, sorted
	// Loaded are the source files the program loaded outside the standard
	// library and site-packages, as the adapter reported them.
	Loaded []File `json:"loaded"`
	// LoadedTruncated says the adapter reported only some of them, so they
	// cannot all be checked.
	LoadedTruncated bool `json:"loaded_truncated"`
	// Opened are the files the program opened for reading besides those,
	// as the adapter reported them (adapter.Event.Opened: a bounded few,
	// past which the data it streams is left out); checked as Loaded.
	Opened []File `json:"opened"`
}

// File is one file an answer depends on. Hash is "sha256:<hex>" of its
// contents, "stat:<size>:<mtime ns>" for one beyond the hashing budget, and
// "" when it could not be read (which never matches).
type File struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
}

// Git is the state of the repository the command runs in.
type Git struct {
	Commit string `json:"commit"` // "" before the first commit
	// Diff is the SHA-256 of the uncommitted changes: `git diff HEAD` and
	// the names of untracked files.
	Diff string `json:"diff"`
}

// Settings are the search options that shape the answer.
type Settings struct {
	Min         int     `json:"min"`
	Max         int     `json:"max"`
	Start       int     `json:"start"`
	MultipleOf  int     `json:"multiple_of"`
	Steps       int     `json:"steps"`
	Strategy    string  `json:"strategy"`
	Confirm     int     `json:"confirm"`
	TimeoutSecs float64 `json:"timeout_seconds"`
	MemoryLimit uint64  `json:"memory_limit_bytes"`
	// MemoryLimitScope is what MemoryLimit holds: "process" (the whole
	// process, as a real card) or "allocator" (the framework's allocator
	// only, as PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction); ""
	// without a limit.
	MemoryLimitScope string `json:"memory_limit_scope"`
	// MemoryLimitCard is the card --memory-limit named ("NVIDIA L4").
	MemoryLimitCard string  `json:"memory_limit_card"`
	Margin          float64 `json:"margin_percent"`
	Parallel        int     `json:"parallel"`
	SoakSecs        float64 `json:"soak_seconds"` // --soak
	Framework       string  `json:"framework"`    // adapter.Framework's name
	Preload         bool    `json:"preload"`      // --preload: trials may be forked (Trial.Forked)
	// WorstCase is --worst-case: "on" when trials run the loader's
	// largest batches first where they can, "off"; "" in runs recorded
	// before the flag.
	WorstCase string `json:"worst_case"`
}

// How an answer under --memory-limit was proven (Run.Proof).
const (
	// ProofHeld: in trials on a held card, which had the named card's
	// memory for all they did (Trial.Held).
	ProofHeld = "held"
	// ProofCapped: in trials whose allocator was capped to the limit,
	// less what they held outside it; a real card may take a size or
	// two less.
	ProofCapped = "capped"
)

// The scopes of a memory limit (Settings.MemoryLimitScope): what it holds.
const (
	ScopeProcess   = "process"   // the whole process, CUDA context included, as a real card
	ScopeAllocator = "allocator" // only the framework's allocator
)

// GPUInfo is the device the search ran on.
type GPUInfo struct {
	Devices  []gpu.Device `json:"devices"`
	Capacity uint64       `json:"capacity_bytes"` // what the trial may use: the card or --memory-limit
}

// Trial is one finished trial.
type Trial struct {
	N         int              `json:"n"` // 1, 2, … in start order
	Size      int              `json:"batch_size"`
	Outcome   classify.Outcome `json:"outcome"`
	Reason    string           `json:"reason"`
	Seconds   float64          `json:"seconds"`
	ExitCode  int              `json:"exit_code"`
	Signal    string           `json:"signal"`
	Retry     bool             `json:"retry"`
	Phase     string           `json:"phase"`
	GPUs      []int            `json:"gpus"`
	Allocated uint64           `json:"peak_allocated_bytes"`
	Reserved  uint64           `json:"peak_reserved_bytes"`
	Device    uint64           `json:"peak_device_bytes"` // NVML, whole process tree
	// PoolLimit is the framework's own pool limit, when it reported one
	// (JAX's bytes_limit, 75 % of the card unless told otherwise): the
	// capacity its allocated peak must fit in, below the card's.
	PoolLimit uint64 `json:"pool_limit_bytes"`
	// Foreign is the memory other processes gained on the trial's GPU
	// while it ran (gpu.Peak.Foreign). Busy marks a trial they disturbed
	// past the threshold: it is not believed, and runs again.
	Foreign     uint64    `json:"foreign_bytes"`
	ForeignPIDs []int     `json:"foreign_pids"`
	Busy        bool      `json:"gpu_busy"`
	StepTimes   []float64 `json:"step_seconds"`
	Steps       int       `json:"steps"` // training steps the adapter counted
	// StepPeaks are the framework's peak memory after each step, from the
	// adapter, so that memory still rising at the last step shows.
	StepPeaks []uint64 `json:"step_peak_bytes"`
	// Rising is how much the peak grew at the last step, when it grew by
	// more than noise (see Rising), judged after the batches meant to
	// raise it where the shapes varied (RisingAfter): memory not yet
	// settled, which a longer run may take past the card.
	Rising uint64 `json:"rising_bytes"`
	// Forked marks a trial forked from a server that had preloaded the
	// program's modules (--preload), not started afresh.
	Forked bool `json:"forked"`
	// SizeRead marks a trial whose program took its batch size from
	// batchfit.batch_size(): the size reached it, {} or not.
	SizeRead bool `json:"size_read"`
	// AllocatorCap is what the framework's allocator was allowed when that
	// was less than --memory-limit: the limit less what the process holds
	// outside the allocator, so that the limit holds for the whole process.
	AllocatorCap uint64 `json:"allocator_cap_bytes"`
	// Held says the trial ran on a held card: batchfit held all but
	// --memory-limit of its GPUs while it ran, so that the process had
	// the named card's memory for all it did, with no allocator cap.
	Held bool `json:"held"`
	// StartedEarly marks a held trial whose process started while the
	// trial before it still had the GPU, and waited at its gate before it
	// touched the GPU: its seconds run from the gate, as its time limit did.
	StartedEarly bool `json:"started_early"`
	// BesideEarly marks a held trial that ran while the next one, started
	// early, did its CPU work: its step times are not its own speed, and
	// give no throughput.
	BesideEarly bool `json:"beside_early"`
	// OOM is what an out-of-memory failure said of itself (nil for other
	// outcomes, or when it said nothing): how far the trial was from
	// fitting, which the planner reads and a replay of the search needs.
	OOM *OOMFigures `json:"oom"`
	// SharedGPU marks a trial that ran at the same time as another of the
	// search on the same GPU (several capped trials a GPU under a roomy
	// memory limit): its step times are not its own speed, and give no
	// throughput.
	SharedGPU bool `json:"shared_gpu"`
	// Warm-worker trials: the worker's pid, the memory its reset left
	// above the baseline, whether the reset verified, and why the worker
	// was replaced after this trial.
	WorkerPID int    `json:"worker_pid"`
	Retained  int64  `json:"retained_bytes"`
	Verified  *bool  `json:"reset_verified"`
	Recycled  string `json:"recycled"`

	Stdout string `json:"stdout_log"`
	Stderr string `json:"stderr_log"`
	Tail   string `json:"stderr_tail"` // kept for crashes only
	// Plan is XLA's memory plan for a JAX step, read before the step ran
	// (adapter.XLAPlan); Plan.Stopped says the trial ended on it, out of
	// memory, without running the step. nil for other frameworks.
	Plan *adapter.XLAPlan `json:"xla_plan"`
	// Batches are the shapes of the batches the trial's steps consumed, as
	// the adapter saw them; nil when it saw none. Last: a nested object the
	// size of the trial's steps.
	Batches *adapter.Batches `json:"batches"`

	// allocatorOnly is set on the copies Run.MarshalJSON writes: the run's
	// memory limit held the allocator only (Memory).
	allocatorOnly bool
}

// OOMFigures are an out-of-memory failure's figures (search.Failure): the
// allocation refused, what the allocator held and had reserved then, and
// what it could still have taken; 0 where the failure did not say.
type OOMFigures struct {
	Request   uint64 `json:"request_bytes"`
	Allocated uint64 `json:"allocated_bytes"`
	Reserved  uint64 `json:"reserved_bytes"`
	Free      uint64 `json:"free_bytes"`
	// Process is what the process held on the device, memory outside the
	// allocator (the CUDA context) included: a message's figure, always
	// rounded.
	Process uint64 `json:"process_bytes"`
	// Capped: an allocator cap decided it (a memory fraction, JAX's pool),
	// not the device. Exact: the figures are the allocator's own counters,
	// to the byte, not an error message's rounded ones.
	Capped bool `json:"capped"`
	Exact  bool `json:"exact"`
}

// StepSeconds is the median step time, or 0 when none was reported.
func (t Trial) StepSeconds() float64 {
	if len(t.StepTimes) == 0 {
		return 0
	}
	return median(t.StepTimes)
}

// Throughput is samples per second from the median step time, or 0.
func (t Trial) Throughput() float64 {
	s := t.StepSeconds()
	if s <= 0 || !t.Outcome.Fits() || t.Busy || t.SharedGPU || t.BesideEarly {
		return 0
	}
	return float64(t.Size) / s
}

// Soak is one long run of an answer in a fresh process (--soak): run to
// the program's own end or stopped by batchfit after the soak's time.
type Soak struct {
	Size      int              `json:"batch_size"`
	Trial     int              `json:"trial"`         // its number among the run's trials
	Limit     float64          `json:"limit_seconds"` // how long it was to run
	Seconds   float64          `json:"seconds"`       // how long it ran
	Outcome   classify.Outcome `json:"outcome"`       // ok: it survived
	Reason    string           `json:"reason"`
	Steps     int              `json:"steps"`
	StepPeaks []uint64         `json:"step_peak_bytes"`
	Rising    uint64           `json:"rising_bytes"`
	// WorstFirst says the soak ran the whole loader's batches largest
	// first (the adapter orders the epoch so under BATCHFIT_SOAK=1), so
	// that it met the training's worst batches early.
	WorstFirst bool `json:"worst_first"`
}

// SoakText says what a soak did: "soaked 10m at 282: out of memory after
// 312 steps"; "soaked 10m at 36, the loader's largest batches first: ran
// 10m (700 steps)".
func (s Soak) SoakText() string {
	head := fmt.Sprintf("soaked %s at %d", shortDuration(s.Limit), s.Size)
	if s.WorstFirst {
		head += ", the loader's largest batches first"
	}
	if s.Outcome.Fits() {
		return fmt.Sprintf("%s: ran %s (%d steps)", head, shortDuration(s.Seconds), s.Steps)
	}
	what := string(s.Outcome)
	if s.Outcome == classify.OOM {
		what = "out of memory"
	}
	return fmt.Sprintf("%s: %s after %d steps", head, what, s.Steps)
}

// shortDuration writes seconds as Go writes a duration, without zero
// units: "10m", "1h30m", "2.5s".
func shortDuration(secs float64) string {
	d := time.Duration(secs * float64(time.Second)).Round(100 * time.Millisecond)
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Rising thresholds: growth at the last step counts only above both. The
// cumulative peak of a settled training loop repeats exactly from the
// second or third step on; what jitters is the allocator's rounding and
// the cuBLAS/cuDNN workspaces chosen per step, tens of MiB at most, hence
// the floor. The share keeps that jitter from flagging a large card's
// run while one sample's memory still counts: the SimCLR example
// needs 0.36 % of its 24 GiB a sample.
const (
	RisingFloor = 16 << 20
	RisingShare = 0.0025
)

// Rising returns how much the peak grew at the last of the per-step peaks,
// or 0 when it did not grow by more than noise: the memory of a run whose
// peak still grows at its end (variable sequence lengths, a cache that
// fills, an eval pass that follows the steps) is not yet known.
//
// The first step does not count: an optimizer creates its state in it
// (Adam's two moments), so the second step's peak is higher in every
// ordinary run (by hundreds of MiB for the SimCLR example). It takes
// three steps or more to see memory still rising.
func Rising(peaks []uint64) uint64 {
	growth, _ := RisingAfter(peaks, 0)
	return growth
}

// RisingAfter is Rising judged over the steps after the first from, whose
// batches were expected to raise the peak: the loader's largest batches
// that ran first, or the steps up to the last at which the largest shape
// grew (SettleFrom). The peak of step from (of step 2 at the earliest, as
// for Rising) is the baseline, and growth at the last step after it is
// memory still rising, whatever those batches did. judged is false when
// the trial ran no step after the baseline: its peaks cannot say memory
// stopped rising, however flat they are, since every step it ran was one
// whose batch was to raise them.
func RisingAfter(peaks []uint64, from int) (growth uint64, judged bool) {
	n := len(peaks)
	if n <= settleBase(from) {
		return 0, false
	}
	if peaks[n-1] <= peaks[n-2] {
		return 0, true
	}
	growth = peaks[n-1] - peaks[n-2]
	if growth <= RisingFloor || float64(growth) <= RisingShare*float64(peaks[n-1]) {
		return 0, true
	}
	return growth, true
}

// settleBase is the step whose peak is the baseline for memory still
// rising: step from, never before step 2 (see Rising).
func settleBase(from int) int {
	return max(from, 2)
}

// SettleFrom is how many of a trial's first steps ran batches meant to
// raise its peak, after which memory must stop rising: the loader's
// largest batches when they ran first, the steps up to the last growth of
// the largest shape when the trial ran on past its steps, else none.
func SettleFrom(b *adapter.Batches) int {
	switch {
	case b == nil || !b.Varied:
		return 0
	case b.WorstFirst:
		return b.WorstSteps
	case b.ExtendedSteps > 0:
		return b.GrewAtStep
	}
	return 0
}

// SettleUnseen says the trial's shapes varied and it ran no step after
// the batches meant to raise its peak (SettleFrom): it cannot say memory
// stopped rising. A trial that reported no step at all says nothing either
// way.
func (t Trial) SettleUnseen() bool {
	from := SettleFrom(t.Batches)
	steps := max(t.Steps, len(t.StepPeaks))
	return from > 0 && steps > 0 && steps <= settleBase(from)
}

// RisingAtAnswer returns the trials at the answer that ran and whose peak
// was still rising at their last step, soaks left out.
func (r *Run) RisingAtAnswer() []Trial {
	var out []Trial
	for _, t := range r.Trials {
		if t.Size == r.Answer && t.Outcome.Fits() && t.Rising > 0 && t.Phase != PhaseSoak {
			out = append(out, t)
		}
	}
	return out
}

// UnsettledAtAnswer returns the trials at the answer that ran and whose
// steps never went past the batches meant to raise their peak
// (Trial.SettleUnseen), soaks left out.
func (r *Run) UnsettledAtAnswer() []Trial {
	var out []Trial
	for _, t := range r.Trials {
		if t.Size == r.Answer && t.Outcome.Fits() && t.SettleUnseen() && t.Phase != PhaseSoak {
			out = append(out, t)
		}
	}
	return out
}

// PhaseSoak labels the trials of --soak.
const PhaseSoak = "soak"

// PhaseThroughput labels the trials of --throughput.
const PhaseThroughput = "throughput"

// Pair is a contradiction that held after a retry.
type Pair struct {
	OK   int `json:"ok_size"`
	Fail int `json:"fail_size"`
}

// Risk is where a run's failures put sizes at risk: From's failure asked
// for ShortfallBytes more than was free, SlopeBytes a sample, so sizes
// from Size up can fail as From did.
type Risk struct {
	Size           int     `json:"batch_size"`
	From           int     `json:"from_size"`
	ShortfallBytes float64 `json:"shortfall_bytes"`
	SlopeBytes     float64 `json:"slope_bytes"`
}

// AtRiskText says in words where the failures put sizes at risk, for
// warnings and reports: "by its failures' own figures sizes from 672 up can
// fail"; "" when they put none.
func (r *Run) AtRiskText() string {
	if r.AtRisk == nil {
		return ""
	}
	return fmt.Sprintf("by its failures' own figures sizes from %d up can fail", r.AtRisk.Size)
}

// FlakySize is a size whose trials disagreed: it ran OK times and failed
// Failed times.
type FlakySize struct {
	Size   int `json:"batch_size"`
	OK     int `json:"ok"`
	Failed int `json:"failed"`
}

// FlakyText says in words which sizes were flaky, for warnings and
// reports: "100 ran 1 time and failed 2 times; 99 ran 2 times and failed 1
// time".
func (r *Run) FlakyText() string {
	var parts []string
	for _, f := range r.Flaky {
		parts = append(parts, fmt.Sprintf("%d ran %s and failed %s", f.Size, times(f.OK), times(f.Failed)))
	}
	return strings.Join(parts, "; ")
}

func times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return fmt.Sprintf("%d times", n)
}

// Model is the fitted memory model, peak = Intercept + Slope × size.
// Pool is a framework's memory pool on the named card: its size, its
// share of the card, and where that share came from.
type Pool struct {
	Framework string  `json:"framework"` // "jax"
	Bytes     uint64  `json:"bytes"`
	Share     float64 `json:"share"`  // of the card's memory
	Source    string  `json:"source"` // "jaxlib's default", or the variable that set it
}

type Model struct {
	Figure    string  `json:"figure"` // "allocated" or "device"
	Intercept float64 `json:"intercept_bytes"`
	Slope     float64 `json:"bytes_per_sample"`
	Residual  float64 `json:"max_residual_bytes"`
	// Outside is the memory outside Figure that the capacity was taken to
	// lose where the boundary was decided against the model (the CUDA
	// context: NVML's peak less the reserved peak, the least a trial
	// showed); 0 when unmeasured, for the device figure, and under an
	// allocator cap or a framework's pool, which the context lies outside.
	// The model of a size's whole memory is Intercept + Outside + Slope·n.
	Outside float64 `json:"outside_bytes"`
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// LastFailure returns the last trial at size that did not run, or nil: the
// trial that proves a failure (or shows a crash) at that size.
func (r *Run) LastFailure(size int) *Trial {
	for i := len(r.Trials) - 1; i >= 0; i-- {
		if t := &r.Trials[i]; t.Size == size && !t.Outcome.Fits() && !t.Busy {
			return t
		}
	}
	return nil
}

// Smallest returns the smallest batch size tried, or Settings.Min when no
// trial ran. Where nothing fits it is the size that proved it: the
// smallest on the grid, which --multiple-of can put above --min.
func (r *Run) Smallest() int {
	n := 0
	for _, t := range r.Trials {
		if n == 0 || t.Size < n {
			n = t.Size
		}
	}
	if n == 0 {
		return r.Settings.Min
	}
	return n
}

// Rechecks counts the trials that re-ran a size to check it (Trial.Retry):
// the proof's, and those of results that contradicted the others.
func (r *Run) Rechecks() int {
	n := 0
	for _, t := range r.Trials {
		if t.Retry {
			n++
		}
	}
	return n
}
