package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/worker"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const (
	mib = 1 << 20
	gib = 1 << 30
)

// fakeWorker is a scripted worker on a simulated card: a trial at size
// needs base + size*perSample at its peak and runs out of memory when that
// and whatever earlier trials left allocated exceed capacity.
type fakeWorker struct {
	hello     worker.Hello
	capacity  uint64
	perSample uint64
	// What the Trial's code keeps: perTrial after every trial that ran,
	// onOOM after a trial that ran out of memory, once after the first.
	perTrial, onOOM, once int64
	// fragOnOOM is reserved-but-unused memory an OOM leaves behind.
	fragOnOOM uint64
	// stateAt is the trial that creates optimizer state (0: none).
	stateAt int
	dieAt   int // the size at which the worker dies (0: never)

	retained int64
	frag     uint64
	n        int
	sizes    []int
	closed   bool
}

func (f *fakeWorker) Hello() worker.Hello { return f.hello }

func (f *fakeWorker) Close() error { f.closed = true; return nil }

func (f *fakeWorker) Trial(ctx context.Context, size, steps int, timeout time.Duration) (worker.Result, error) {
	if f.closed {
		return worker.Result{}, worker.ErrClosed
	}
	f.n++
	f.sizes = append(f.sizes, size)
	base := f.hello.BaselineAllocated
	need := base + uint64(size)*f.perSample + uint64(f.retained)
	r := worker.Result{ID: f.n, Size: size, Steps: steps, Outcome: classify.OK, Reason: "ok", WorkerPID: 42,
		StepSeconds: []float64{0.1, 0.1, 0.1}}
	switch {
	case size == f.dieAt:
		f.closed = true
		r.Outcome, r.Reason, r.WorkerGone = classify.Crash, "the worker died during the trial (killed by SIGSEGV)", true
		return r, nil
	case need > f.capacity:
		r.Outcome = classify.OOM
		r.Reason = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
		r.Exception = r.Reason
		r.PeakAllocated = f.capacity - 10*mib
		f.retained += f.onOOM
		f.frag += f.fragOnOOM
	default:
		r.PeakAllocated = need
		f.retained += f.perTrial
		if f.n == 1 {
			f.retained += f.once
		}
	}
	if f.hello.Verify == "cuda_allocated" {
		r.PeakReserved = r.PeakAllocated + 20*mib
		r.AllocatedAfter = base + uint64(f.retained)
		r.ReservedAfter = f.hello.BaselineReserved + uint64(f.retained) + f.frag
	} else {
		r.PeakAllocated, r.PeakReserved = 0, 0
	}
	r.RetainedBytes = f.retained
	r.Verified = f.retained == 0
	r.OptimizerStateBytes = f.hello.OptimizerStateBytes
	if f.n == f.stateAt {
		r.OptimizerStateCreated = true
		r.OptimizerStateBytes += 200 * mib
	}
	if f.retained > 0 {
		r.RetainedTensors = []worker.Tensor{{Shape: []int{512, 3, 224, 224}, DType: "float32", Device: "cuda:0", Bytes: uint64(f.retained)}}
	}
	return r, nil
}

func cudaHello() worker.Hello {
	return worker.Hello{Version: 1, PID: 42, Target: "leaky_trial.py:Trial", Torch: "2.11.0", CUDA: true,
		Device: "NVIDIA H200", DeviceTotal: 140 * gib, Verify: "cuda_allocated",
		BaselineAllocated: 300 * mib, BaselineReserved: 320 * mib, WarmupSize: 1, WarmupSteps: 2,
		Optimizers: 1, OptimizerStateBytes: 200 * mib}
}

// card is a 24 GiB card where batch size 282 is the largest that fits.
func card() *fakeWorker {
	return &fakeWorker{hello: cudaHello(), capacity: 24 * gib, perSample: (24*gib - 300*mib) / 282}
}

// fresh returns a fresh-process comparison that measures peak at size
// like the card would, plus extra, and checks that the worker is closed.
func fresh(t *testing.T, f *fakeWorker, extra int64) func(context.Context, int) (search.Observation, error) {
	return func(ctx context.Context, size int) (search.Observation, error) {
		if !f.closed {
			t.Error("the fresh process ran while the worker was open")
		}
		peak := uint64(int64(f.hello.BaselineAllocated+uint64(size)*f.perSample) + extra)
		o := search.Observation{Size: size, Outcome: classify.OK, Memory: search.Memory{Allocated: peak}}
		if peak > f.capacity {
			o.Outcome = classify.OOM
		}
		return o, nil
	}
}

func kinds(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Kind
	}
	return out
}

func find(fs []Finding, kind string) *Finding {
	for i := range fs {
		if fs[i].Kind == kind {
			return &fs[i]
		}
	}
	return nil
}

// The protocol: the size K times, doubling until out of memory, the size
// again; the worker is closed before the fresh process runs.
func TestProtocol(t *testing.T) {
	f := card()
	var seen []Phase
	r, err := Run(context.Background(), Config{Size: 32, Fresh: fresh(t, f, 0), OnTrial: func(tr Trial) { seen = append(seen, tr.Phase) }}, f)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{32, 32, 32, 64, 128, 256, 512, 32}; !slices.Equal(f.sizes, want) {
		t.Errorf("sizes %v, want %v", f.sizes, want)
	}
	if r.OOMSize != 512 || r.Stopped != "" || r.Fresh == nil || !f.closed || len(seen) != 8 || seen[7] != PhaseAfterOOM {
		t.Errorf("report = %+v, phases %v", r, seen)
	}
	if got := kinds(r.Findings); !slices.Equal(got, []string{KindClean, KindPeakMatches}) {
		t.Errorf("findings %v", got)
	}
}

func TestFindings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fakeWorker)
		cfg   Config
		extra int64 // the fresh process's peak above the card's
		want  []string
		check func(t *testing.T, r *Report)
	}{
		{
			name:  "a list of loss tensors",
			setup: func(f *fakeWorker) { f.perTrial = 1536 },
			want:  []string{KindGrowing, KindPeakMatches},
			check: func(t *testing.T, r *Report) {
				g := find(r.Findings, KindGrowing)
				if g.Bytes != 1536 || !strings.Contains(g.Summary, "1.5 KiB more per trial") || !strings.Contains(g.Fix, "loss.item()") {
					t.Errorf("finding = %+v", g)
				}
			},
		},
		{
			name:  "the last batch kept on self",
			setup: func(f *fakeWorker) { f.once = 40 * mib },
			want:  []string{KindRetained, KindPeakMatches},
			check: func(t *testing.T, r *Report) {
				if g := find(r.Findings, KindRetained); g.Bytes != 40*mib || !strings.Contains(g.Summary, "40.0 MiB stays allocated after every trial at batch size 32") {
					t.Errorf("finding = %+v", g)
				}
			},
		},
		{
			name:  "the question: the failed trial's batch stays alive",
			setup: func(f *fakeWorker) { f.onOOM = 3 * gib },
			cfg:   Config{Size: 256},
			want:  []string{KindRetainedAfterOOM, KindNonMonotonic, KindPeakMatches},
			check: func(t *testing.T, r *Report) {
				g := find(r.Findings, KindRetainedAfterOOM)
				if g.Bytes != 3*gib || !strings.Contains(g.Summary, "3.00 GiB stays allocated after the out-of-memory error at batch size 512") ||
					!strings.Contains(g.Cause, "retry inside `except`") || len(g.Tensors) != 1 {
					t.Errorf("finding = %+v", g)
				}
				if n := find(r.Findings, KindNonMonotonic); !strings.Contains(n.Summary, "batch size 256 ran 3 times before the OOM at 512 and fails after it") {
					t.Errorf("finding = %+v", n)
				}
			},
		},
		{
			name:  "leak after the OOM that still fits",
			setup: func(f *fakeWorker) { f.onOOM = 100 * mib },
			want:  []string{KindRetainedAfterOOM, KindPeakMatches},
			check: func(t *testing.T, r *Report) {
				if g := find(r.Findings, KindRetainedAfterOOM); !strings.Contains(g.Summary, "the peak at batch size 32 went from") {
					t.Errorf("the after-OOM peak must be reported: %+v", g)
				}
			},
		},
		{
			name:  "fragmentation after the OOM",
			setup: func(f *fakeWorker) { f.fragOnOOM = 3 * gib },
			want:  []string{KindFragmentation, KindPeakMatches},
			check: func(t *testing.T, r *Report) {
				if g := find(r.Findings, KindFragmentation); !strings.Contains(g.Summary, "3.02 GiB is reserved but not allocated") || !strings.Contains(g.Fix, "expandable_segments") {
					t.Errorf("finding = %+v", g)
				}
			},
		},
		{
			name:  "optimizer state made during a trial",
			setup: func(f *fakeWorker) { f.stateAt = 1 },
			want:  []string{KindOptimizerState, KindPeakMatches},
			check: func(t *testing.T, r *Report) {
				if g := find(r.Findings, KindOptimizerState); g.Bytes != 200*mib || !strings.Contains(g.Summary, "during trial 1") || !strings.Contains(g.Fix, "warm-up") {
					t.Errorf("finding = %+v", g)
				}
			},
		},
		{
			name:  "a fresh process needs more",
			extra: 300 * mib,
			want:  []string{KindPeakDiffers},
			check: func(t *testing.T, r *Report) {
				if g := find(r.Findings, KindPeakDiffers); g.Bytes != -300*mib || !strings.Contains(g.Summary, "(-300.0 MiB)") {
					t.Errorf("finding = %+v", g)
				}
			},
		},
		{
			name:  "a fresh process does not fit",
			cfg:   Config{Size: 280},
			extra: 2 * gib,
			want:  []string{KindFreshFails},
		},
		{
			name:  "within noise of a fresh process",
			extra: 1 * mib,
			want:  []string{KindClean, KindPeakMatches},
		},
		{
			name:  "the worker dies",
			setup: func(f *fakeWorker) { f.dieAt = 128 },
			want:  []string{KindStopped},
			check: func(t *testing.T, r *Report) {
				if r.Fresh != nil || !strings.Contains(r.Stopped, "batch size 128 ended in crash") {
					t.Errorf("report = %+v", r)
				}
			},
		},
		{
			name: "no optimizer found",
			setup: func(f *fakeWorker) {
				f.hello.Optimizers = 0
			},
			want: []string{KindNoOptimizer, KindPeakMatches},
		},
		{
			name: "on the CPU: no allocator figures",
			setup: func(f *fakeWorker) {
				f.hello.CUDA, f.hello.Verify, f.hello.Device = false, "python_tensors", "cpu"
				f.fragOnOOM = 3 * gib
			},
			want: []string{KindClean, KindNoComparison},
		},
		{
			name: "the size does not fit",
			cfg:  Config{Size: 300},
			want: []string{KindStopped},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := card()
			if tc.setup != nil {
				tc.setup(f)
			}
			cfg := tc.cfg
			if cfg.Size == 0 {
				cfg.Size = 32
			}
			cfg.MaxSize = 1024
			cfg.Fresh = fresh(t, f, tc.extra)
			r, err := Run(context.Background(), cfg, f)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(r.Findings); !slices.Equal(got, tc.want) {
				for _, f := range r.Findings {
					t.Logf("%s: %s", f.Severity, f.Summary)
				}
				t.Fatalf("findings %v, want %v", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			var buf bytes.Buffer
			if err := WriteText(&buf, r); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	f := card()
	if _, err := Run(context.Background(), Config{}, f); err == nil || !f.closed {
		t.Errorf("a zero size must be refused, and the worker closed: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f = card()
	w := &cancelingWorker{f}
	r, err := Run(ctx, Config{Size: 8}, w)
	if err == nil || r == nil || len(r.Trials) != 1 {
		t.Errorf("report %+v, err %v", r, err)
	}
	f = card()
	r, err = Run(context.Background(), Config{Size: 8, Fresh: func(context.Context, int) (search.Observation, error) {
		return search.Observation{}, os.ErrPermission
	}}, f)
	if err != nil || find(r.Findings, KindNoComparison) == nil {
		t.Errorf("a failed comparison is a finding: %v %v", kinds(r.Findings), err)
	}
}

type cancelingWorker struct{ *fakeWorker }

func (c *cancelingWorker) Trial(ctx context.Context, size, steps int, timeout time.Duration) (worker.Result, error) {
	return worker.Result{ID: 1, Size: size, Outcome: classify.Canceled, WorkerGone: true}, nil
}

// The text and JSON of a failed trial's batch kept alive (an in-process
// search's mistake), against golden files.
func TestGolden(t *testing.T) {
	f := card()
	f.onOOM = 3 * gib
	f.perTrial = 1536
	f.fragOnOOM = 1 * gib
	r, err := Run(context.Background(), Config{Size: 256, Fresh: fresh(t, f, 0)}, f)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "question.txt", text.Bytes())
	golden(t, "question.json", append(js, '\n'))
	checkSnakeCase(t, js)
}

// Every key doctor --json prints is snake_case, as in the rest of
// batchfit's JSON. The report is filled so that every field is set and no
// key is left out for being empty.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	var r Report
	fill(reflect.ValueOf(&r).Elem())
	js, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkSnakeCase(t, js); n < 50 {
		t.Errorf("only %d keys in a full report: %s", n, js)
	}
}

var snakeCase = regexp.MustCompile(`^[a-z0-9_]+$`)

// checkSnakeCase fails t for every object key in js that is not snake_case
// and returns how many keys it checked.
func checkSnakeCase(t *testing.T, js []byte) int {
	t.Helper()
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				n++
				if !snakeCase.MatchString(k) {
					t.Errorf("key %q at %s is not snake_case", k, path)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("$", v)
	return n
}

// fill sets everything reachable from v to a value that is not zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}
