package record

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
)

// The JSON form of a run is what --json prints and what the store keeps
// (docs/json.md): every key is always there, null for what is unknown or
// not set and [] for an empty list, so that scripts never test for a
// missing key. The Marshal methods below shadow the fields whose zero value
// means "none" with a nullable copy (an outer field wins over the embedded
// one of the same name), and add what is derived: samples/s, the margins;
// ordered puts the keys back in the order of the struct's fields.
// Decoding reads null as a plain field's zero, and [] as a nil list, so that
// a run reads back as it was written.

// ordered marshals v, a T whose nullable copies shadow some fields, with
// its keys in the order of T's fields, each key of after written after the
// key it names: the encoder writes shadowing fields last, which would
// scatter a run's keys.
func ordered[T any](v any, after map[string]string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('{')
	write := func(k string) {
		raw, ok := m[k]
		if !ok {
			return
		}
		delete(m, k)
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		out.Write(key)
		out.WriteByte(':')
		out.Write(raw)
	}
	t := reflect.TypeFor[T]()
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		write(name)
		for _, d := range slices.Sorted(maps.Keys(after)) {
			if after[d] == name {
				write(d)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		write(k)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func num[T int | int64 | uint64 | float64](n T) *T {
	if n == 0 {
		return nil
	}
	return &n
}

func list[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// unlist is list undone: a decoded [] is nil again.
func unlist[T any](xs *[]T) {
	if len(*xs) == 0 {
		*xs = nil
	}
}

func when(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// MarshalJSON writes the run with every key present (docs/json.md).
func (r Run) MarshalJSON() ([]byte, error) {
	type plain Run // no methods: no recursion
	return ordered[Run](struct {
		plain
		ID           *string     `json:"id"`
		Fingerprint  *string     `json:"fingerprint"`
		Finished     *time.Time  `json:"finished"`
		Torch        *string     `json:"torch"`
		Answer       *int        `json:"answer"`
		FirstFailure *int        `json:"first_failure"`
		Margins      []Margin    `json:"margins"`
		Recommended  *int        `json:"recommended"`
		Trials       []Trial     `json:"trials"`
		NonMonotonic []Pair      `json:"non_monotonic"`
		Flaky        []FlakySize `json:"flaky"`
		Error        *string     `json:"error"`
		LogDir       *string     `json:"log_dir"`
		CachedFrom   *string     `json:"cached_from"`
		Warnings     []string    `json:"warnings"`
		Proof        *string     `json:"proof"`
		Soaks        []Soak      `json:"soaks"`
	}{
		plain: plain(r), ID: str(r.ID), Fingerprint: str(r.Fingerprint), Finished: when(r.Finished),
		Torch: str(r.Torch), Answer: num(r.Answer), FirstFailure: num(r.FirstFailure),
		Margins: r.Margins(), Recommended: num(r.Recommended), Trials: list(r.jsonTrials()),
		NonMonotonic: list(r.NonMonotonic), Flaky: list(r.Flaky), Error: str(r.Error),
		LogDir: str(r.LogDir), CachedFrom: str(r.CachedFrom), Warnings: list(r.Warnings), Proof: str(r.Proof),
		Soaks: list(r.Soaks),
	}, map[string]string{"margins": "first_failure"})
}

// jsonTrials are the run's trials as its JSON writes them: each knows
// whether the run's memory limit held the allocator only, which its
// needed memory is in the terms of.
func (r Run) jsonTrials() []Trial {
	scope := r.Settings.MemoryLimitScope == ScopeAllocator
	out := slices.Clone(r.Trials)
	for i := range out {
		out[i].allocatorOnly = scope
	}
	return out
}

// UnmarshalJSON reads a run as MarshalJSON writes it, and as older
// batchfit versions stored it: the --margin answer is the searched one of
// "margins", or the old "margin_size".
func (r *Run) UnmarshalJSON(b []byte) error {
	type plain Run
	var aux struct {
		*plain
		Margins    []Margin `json:"margins"`
		MarginSize int      `json:"margin_size"`
	}
	aux.plain = (*plain)(r)
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	unlist(&r.NonMonotonic)
	unlist(&r.Flaky)
	unlist(&r.Warnings)
	unlist(&r.Soaks)
	r.Margin = aux.MarginSize
	for _, m := range aux.Margins {
		if m.Basis == MarginSearched {
			r.Margin = m.Size
		}
	}
	return nil
}

// MarshalJSON writes the margin with every key present.
func (m Margin) MarshalJSON() ([]byte, error) {
	type plain Margin
	return ordered[Margin](struct {
		plain
		Size *int    `json:"batch_size"`
		Why  *string `json:"why"`
	}{plain(m), num(m.Size), str(m.Why)}, nil)
}

// MarshalJSON writes the settings with every key present.
func (s Settings) MarshalJSON() ([]byte, error) {
	type plain Settings
	return ordered[Settings](struct {
		plain
		Start            *int     `json:"start"`
		MemoryLimit      *uint64  `json:"memory_limit_bytes"`
		MemoryLimitScope *string  `json:"memory_limit_scope"`
		MemoryLimitCard  *string  `json:"memory_limit_card"`
		Margin           *float64 `json:"margin_percent"`
		SoakSecs         *float64 `json:"soak_seconds"`
		Framework        *string  `json:"framework"`
		WorstCase        *string  `json:"worst_case"`
	}{plain(s), num(s.Start), num(s.MemoryLimit), str(s.MemoryLimitScope), str(s.MemoryLimitCard), num(s.Margin), num(s.SoakSecs), str(s.Framework), str(s.WorstCase)}, nil)
}

// device is a gpu.Device in a run's JSON.
type device gpu.Device

// MarshalJSON writes the device with every key present.
func (d device) MarshalJSON() ([]byte, error) {
	return ordered[gpu.Device](struct {
		gpu.Device
		UUID   *string `json:"uuid"`
		Driver *string `json:"driver"`
		CUDA   *string `json:"cuda"`
	}{gpu.Device(d), str(d.UUID), str(d.Driver), str(d.CUDA)}, nil)
}

// MarshalJSON writes the GPUs with every key of a device present.
func (g GPUInfo) MarshalJSON() ([]byte, error) {
	devices := make([]device, len(g.Devices))
	for i, d := range g.Devices {
		devices[i] = device(d)
	}
	return json.Marshal(struct {
		Devices  []device `json:"devices"`
		Capacity uint64   `json:"capacity_bytes"`
	}{devices, g.Capacity})
}

// MarshalJSON writes the trial with every key present, and its samples/s.
func (t Trial) MarshalJSON() ([]byte, error) {
	type plain Trial
	var retained *int64
	if t.WorkerPID != 0 {
		retained = &t.Retained
	}
	return ordered[Trial](struct {
		plain
		Reason      *string   `json:"reason"`
		Signal      *string   `json:"signal"`
		Phase       *string   `json:"phase"`
		GPUs        []int     `json:"gpus"`
		Allocated   *uint64   `json:"peak_allocated_bytes"`
		Reserved    *uint64   `json:"peak_reserved_bytes"`
		Device      *uint64   `json:"peak_device_bytes"`
		PoolLimit   *uint64   `json:"pool_limit_bytes"`
		Foreign     *uint64   `json:"foreign_bytes"`
		ForeignPIDs []int     `json:"foreign_pids"`
		StepTimes   []float64 `json:"step_seconds"`
		Steps       *int      `json:"steps"`
		StepPeaks   []uint64  `json:"step_peak_bytes"`
		Rising      *uint64   `json:"rising_bytes"`
		Batches     *batches  `json:"batches"`
		AllocCap    *uint64   `json:"allocator_cap_bytes"`
		Throughput  *float64  `json:"samples_per_second"`
		WorkerPID   *int      `json:"worker_pid"`
		Retained    *int64    `json:"retained_bytes"`
		Recycled    *string   `json:"recycled"`
		Stdout      *string   `json:"stdout_log"`
		Stderr      *string   `json:"stderr_log"`
		Tail        *string   `json:"stderr_tail"`
		Needed      *needJSON `json:"needed"`
	}{
		plain: plain(t), Reason: str(t.Reason), Signal: str(t.Signal), Phase: str(t.Phase), GPUs: list(t.GPUs),
		Allocated: num(t.Allocated), Reserved: num(t.Reserved), Device: num(t.Device), PoolLimit: num(t.PoolLimit), Foreign: num(t.Foreign),
		ForeignPIDs: list(t.ForeignPIDs), StepTimes: list(t.StepTimes), Steps: num(t.Steps),
		StepPeaks: list(t.StepPeaks), Rising: num(t.Rising), Batches: (*batches)(t.Batches), AllocCap: num(t.AllocatorCap), Throughput: num(t.Throughput()),
		WorkerPID: num(t.WorkerPID), Retained: retained, Recycled: str(t.Recycled),
		Stdout: str(t.Stdout), Stderr: str(t.Stderr), Tail: str(t.Tail), Needed: t.neededJSON(),
	}, map[string]string{"samples_per_second": "step_seconds", "needed": "peak_device_bytes"})
}

// needJSON is a trial's Need in a run's JSON.
type needJSON struct {
	Bytes uint64 `json:"bytes"`
	Basis string `json:"basis"`
}

// neededJSON is what the trial needed at least, nil when it fits or
// nothing is known; in the terms of its run's memory limit (Run.MarshalJSON
// sets allocatorOnly).
func (t Trial) neededJSON() *needJSON {
	n := t.Needed(t.allocatorOnly)
	if n.Bytes == 0 {
		return nil
	}
	return &needJSON{Bytes: n.Bytes, Basis: n.Basis}
}

// batches is a trial's adapter.Batches in a run's JSON.
type batches adapter.Batches

// MarshalJSON writes the batches with every key present, and the ranges
// of the tensors that varied.
func (b *batches) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	return ordered[adapter.Batches](struct {
		adapter.Batches
		Shapes         []adapter.BatchShape `json:"shapes"`
		WorstSteps     *int                 `json:"worst_steps"`
		WhyNot         *string              `json:"why_not"`
		ScanSeconds    *float64             `json:"scan_seconds"`
		ScannedBatches *int                 `json:"scanned_batches"`
		ExtendedSteps  *int                 `json:"extended_steps"`
		GrewAtStep     *int                 `json:"grew_at_step"`
		Bound          *string              `json:"bound"`
		Ranges         []ShapeRange         `json:"ranges"`
	}{adapter.Batches(*b), list(b.Shapes), num(b.WorstSteps), str(b.WhyNot), num(b.ScanSeconds), num(b.ScannedBatches),
		num(b.ExtendedSteps), num(b.GrewAtStep), str(b.Bound), list(ShapeRanges((*adapter.Batches)(b)))},
		map[string]string{"ranges": "largest"})
}

// MarshalJSON writes the input shapes with every key present.
func (in InputShapes) MarshalJSON() ([]byte, error) {
	type plain InputShapes
	return ordered[InputShapes](struct {
		plain
		WhyNot        *string      `json:"why_not"`
		ExtendedSteps *int         `json:"extended_steps"`
		Bound         *string      `json:"bound"`
		Trial         *int         `json:"trial"`
		Ranges        []ShapeRange `json:"ranges"`
	}{plain(in), str(in.WhyNot), num(in.ExtendedSteps), str(in.Bound), num(in.Trial), list(in.Ranges)}, nil)
}

// MarshalJSON writes the figures with null for those the failure did not
// give.
func (f OOMFigures) MarshalJSON() ([]byte, error) {
	type plain OOMFigures
	return ordered[OOMFigures](struct {
		plain
		Request   *uint64 `json:"request_bytes"`
		Allocated *uint64 `json:"allocated_bytes"`
		Reserved  *uint64 `json:"reserved_bytes"`
		Free      *uint64 `json:"free_bytes"`
		Process   *uint64 `json:"process_bytes"`
	}{plain(f), num(f.Request), num(f.Allocated), num(f.Reserved), num(f.Free), num(f.Process)}, nil)
}

// UnmarshalJSON reads a trial as MarshalJSON writes it.
func (t *Trial) UnmarshalJSON(b []byte) error {
	type plain Trial
	if err := json.Unmarshal(b, (*plain)(t)); err != nil {
		return err
	}
	unlist(&t.GPUs)
	unlist(&t.ForeignPIDs)
	unlist(&t.StepTimes)
	unlist(&t.StepPeaks)
	if t.Batches != nil {
		unlist(&t.Batches.Shapes)
	}
	return nil
}

// MarshalJSON writes the soak with every key present.
func (s Soak) MarshalJSON() ([]byte, error) {
	type plain Soak
	return ordered[Soak](struct {
		plain
		Reason    *string  `json:"reason"`
		StepPeaks []uint64 `json:"step_peak_bytes"`
		Rising    *uint64  `json:"rising_bytes"`
	}{plain(s), str(s.Reason), list(s.StepPeaks), num(s.Rising)}, nil)
}

// UnmarshalJSON reads a soak as MarshalJSON writes it.
func (s *Soak) UnmarshalJSON(b []byte) error {
	type plain Soak
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	unlist(&s.StepPeaks)
	return nil
}

// MarshalJSON writes the inputs with every key present.
func (in Inputs) MarshalJSON() ([]byte, error) {
	type plain Inputs
	return ordered[Inputs](struct {
		plain
		Files  []File   `json:"files"`
		Env    []string `json:"env"`
		Loaded []File   `json:"loaded"`
		Opened []File   `json:"opened"`
	}{plain(in), list(in.Files), list(in.Env), list(in.Loaded), list(in.Opened)}, nil)
}

// UnmarshalJSON reads inputs as MarshalJSON writes them.
func (in *Inputs) UnmarshalJSON(b []byte) error {
	type plain Inputs
	if err := json.Unmarshal(b, (*plain)(in)); err != nil {
		return err
	}
	unlist(&in.Files)
	unlist(&in.Env)
	unlist(&in.Loaded)
	unlist(&in.Opened)
	return nil
}
