package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpugroup"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// A trainer that needs 2 GiB plus 80 MiB a sample on an 80 GiB card.
var plain = fakeTrainer{fixed: 2 * gib, perSample: 80 << 20, limit: 80 * gib}

func TestRunFindsTheAnswerAndRecordsIt(t *testing.T) {
	f := newFixture(plain)
	f.cfg.LogBase = t.TempDir()
	run, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := plain.truth(4096)
	if run.Status != record.Found || run.Answer != want || run.FirstFailure != want+1 {
		t.Fatalf("status %s, answer %d (first failure %d), want found %d", run.Status, run.Answer, run.FirstFailure, want)
	}
	tried := f.exec.tried()
	if len(run.Trials) != len(tried) || len(f.store.trials) != len(tried) || len(f.progress.done) != len(tried) {
		t.Errorf("%d trials ran, %d in the record, %d stored, %d shown", len(tried), len(run.Trials), len(f.store.trials), len(f.progress.done))
	}
	if len(f.store.begun) != 1 || !slices.Equal(f.store.finished, []record.Status{record.Found}) || run.ID != "run-1" {
		t.Errorf("store: begun %d, finished %v, id %q", len(f.store.begun), f.store.finished, run.ID)
	}
	if run.Model == nil || run.Model.Figure != "allocated" || run.Recommended != 0 || run.Throughput != nil {
		t.Errorf("model %+v, recommended %d, throughput %+v: the adapter's figures did not reach the record, or a recommendation came without --throughput",
			run.Model, run.Recommended, run.Throughput)
	}
	if run.Settings.Framework != "torch" || run.Version != "test" || !slices.Equal(run.Command, f.cfg.Command) {
		t.Errorf("settings %+v, version %q, command %q", run.Settings, run.Version, run.Command)
	}
	// The fake clock ticks a second a reading: start and finish.
	if run.Seconds <= 0 || !run.Finished.After(run.Started) {
		t.Errorf("started %v, finished %v, %g s", run.Started, run.Finished, run.Seconds)
	}
	p := f.progress
	if p.closed == 0 || len(p.events) == 0 || len(p.started) != len(tried) || p.info.GPU != "Fake GPU" || p.info.Capacity != 80*gib {
		t.Errorf("progress: closed %d, %d events, %d started, info %+v", p.closed, len(p.events), len(p.started), p.info)
	}
	// A run that found its answer leaves no temporary logs behind.
	if run.LogDir != "" || dirEntries(t, f.cfg.LogBase) != 0 {
		t.Errorf("log dir %q kept, %d entries under the base", run.LogDir, dirEntries(t, f.cfg.LogBase))
	}
	if run.Trials[0].Stderr != "" {
		t.Errorf("a removed log is still named: %q", run.Trials[0].Stderr)
	}
}

func TestRunAnswersFromTheHistory(t *testing.T) {
	f := newFixture(plain)
	f.cfg.LogBase = t.TempDir()
	f.store.cached = &record.Run{ID: "old", Status: record.Found, Answer: 77, Started: f.clock.Now().Add(-50 * time.Hour)}
	run, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !run.Cached || run.Answer != 77 || len(f.exec.tried()) != 0 || len(f.store.begun) != 0 || f.progress.closed != 0 {
		t.Errorf("cached %v answer %d after %d trials, %d runs begun, display used %v", run.Cached, run.Answer, len(f.exec.tried()), len(f.store.begun), f.progress.closed != 0)
	}
	if len(f.notices) != 1 || !strings.Contains(f.notices[0], "answered from the history (run old, 2 days old)") || run.CachedFrom != "old" {
		t.Errorf("notices %q", f.notices)
	}

	// --fresh searches again, and only then starts from the close run.
	f = newFixture(plain)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Fresh = true
	f.store.cached = &record.Run{ID: "old", Status: record.Found, Answer: 77}
	f.store.nearest = &record.Run{ID: "near", Status: record.Found, Answer: 500,
		GPU: &record.GPUInfo{Capacity: 80 * gib}}
	run, err = f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if run.Cached || run.Answer != plain.truth(4096) {
		t.Errorf("--fresh: cached %v, answer %d", run.Cached, run.Answer)
	}
	if tried := f.exec.tried(); tried[0] != 450 || run.Settings.Start != 450 {
		t.Errorf("first trial %d, recorded start %d; want 450 (0.9 × the close run's 500)", tried[0], run.Settings.Start)
	}
	if len(f.notices) != 1 || !strings.Contains(f.notices[0], "starting at 450, from run near") {
		t.Errorf("notices %q", f.notices)
	}
}

func TestRunNothingFitsKeepsTheLogs(t *testing.T) {
	f := newFixture(fakeTrainer{fixed: 90 * gib, perSample: 1, limit: 80 * gib})
	f.cfg.LogBase = t.TempDir()
	f.cfg.Search.Min = 4
	run, err := f.run(context.Background())
	var nf *NothingFitsError
	if !errors.Is(err, search.ErrNothingFits) || !errors.As(err, &nf) || nf.Min != 4 {
		t.Fatalf("err = %v, want nothing fits from 4", err)
	}
	if err.Error() != "nothing fits: batch size 4 does not run: out of GPU memory" || !strings.Contains(nf.Hint(), "lower --min") || !strings.Contains(nf.Hint(), run.LogDir) {
		t.Errorf("message %q, hint %q", err, nf.Hint())
	}
	if run.Status != record.NothingFits || run.LogDir == "" || dirEntries(t, run.LogDir) == 0 {
		t.Errorf("status %s, logs %q", run.Status, run.LogDir)
	}
	if !slices.Equal(f.store.finished, []record.Status{record.NothingFits}) {
		t.Errorf("stored %v", f.store.finished)
	}
	if len(f.notices) != 1 || !strings.Contains(f.notices[0], "logs of every trial are in "+run.LogDir) {
		t.Errorf("notices %q", f.notices)
	}
}

func TestRunNothingFitsNamesItsCause(t *testing.T) {
	for _, tc := range []struct {
		name       string
		trainer    fakeTrainer
		min, step  int
		size       int    // the smallest size tried, named
		want, hint string // the message, and words of the hint
	}{
		{"--multiple-of 8 tried 8, not 1", fakeTrainer{fixed: 90 * gib, perSample: 1, limit: 80 * gib}, 1, 8, 8,
			"nothing fits: batch size 8 does not run: out of GPU memory", "--multiple-of 8 made 8 the smallest size tried: lower --multiple-of"},
		{"--min 1: nothing smaller to try", fakeTrainer{fixed: 90 * gib, perSample: 1, limit: 80 * gib}, 1, 1, 1,
			"nothing fits: batch size 1 does not run: out of GPU memory", "check that it fits on this GPU at all"},
		{"timeouts, not memory", fakeTrainer{fixed: gib, perSample: 1, limit: 80 * gib, hangFrom: 1}, 3, 8, 8,
			"nothing fits: batch size 8 does not run: timed out after 2s", "within --timeout 2s: raise --timeout, or make the command stop after BATCHFIT_STEPS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(tc.trainer)
			f.cfg.LogBase = t.TempDir()
			f.cfg.Timeout = 2 * time.Second
			f.cfg.Search.Min, f.cfg.Search.MultipleOf = tc.min, tc.step
			run, err := f.run(context.Background())
			var nf *NothingFitsError
			if !errors.As(err, &nf) || !errors.Is(err, search.ErrNothingFits) {
				t.Fatalf("err = %v, want nothing fits", err)
			}
			if nf.Size != tc.size || err.Error() != tc.want {
				t.Errorf("size %d, message %q; want %d, %q", nf.Size, err, tc.size, tc.want)
			}
			if h := nf.Hint(); !strings.Contains(h, tc.hint) || !strings.Contains(h, run.LogDir) || strings.Contains(h, "lower --min") {
				t.Errorf("hint %q, want %q and the logs, and not lower --min", h, tc.hint)
			}
			if run.Status != record.NothingFits || run.Error != tc.want || run.Smallest() != tc.size {
				t.Errorf("recorded %s %q, smallest %d", run.Status, run.Error, run.Smallest())
			}
		})
	}
}

func TestNothingFitsMessages(t *testing.T) {
	for _, tc := range []struct {
		err        NothingFitsError
		want, hint string
	}{
		{NothingFitsError{Size: 16, Min: 16, Outcome: classify.HostOOM}, "nothing fits: batch size 16 does not run: out of host memory", "the machine's RAM ran out"},
		{NothingFitsError{Size: 16, Min: 16, Outcome: classify.SizeLimit, Reason: "RuntimeError: CUDA error: invalid configuration argument"},
			"nothing fits: batch size 16 does not run: it hits a size limit that is not memory (RuntimeError: CUDA error: invalid configuration argument)", "lower --min"},
		{NothingFitsError{Size: 16, Min: 16}, "nothing fits: batch size 16 does not run", "lower --min"},
		{NothingFitsError{Size: 5, Min: 2, Outcome: classify.Timeout, Timeout: 15 * time.Minute}, "nothing fits: batch size 5 does not run: timed out after 15m0s", "raise --timeout"},
	} {
		if tc.err.Error() != tc.want || !strings.Contains(tc.err.Hint(), tc.hint) {
			t.Errorf("%q, hint %q; want %q, hint with %q", tc.err.Error(), tc.err.Hint(), tc.want, tc.hint)
		}
	}
}

func TestRunCrashShowsTheTrialsStderr(t *testing.T) {
	f := newFixture(fakeTrainer{fixed: gib, perSample: 1 << 20, limit: 80 * gib, crashAbove: 40})
	f.cfg.LogBase = t.TempDir()
	f.cfg.Search.Strategy = search.Bisect
	run, err := f.run(context.Background())
	var ce *CrashError
	var sc *search.CrashError
	if !errors.As(err, &ce) || !errors.As(err, &sc) {
		t.Fatalf("err = %v, want a CrashError wrapping the search's", err)
	}
	if err.Error() != "trial crashed: crash" || !strings.Contains(ce.Hint(), "mat1 and mat2 shapes") || !strings.Contains(ce.Hint(), "full log: ") {
		t.Errorf("message %q, hint %q", err, ce.Hint())
	}
	if run.Status != record.Failed || run.LogDir == "" {
		t.Errorf("status %s, logs %q", run.Status, run.LogDir)
	}
}

func TestRunInterruptedIsRecorded(t *testing.T) {
	block := make(chan struct{})
	f := newFixture(fakeTrainer{fixed: gib, perSample: 1 << 20, limit: 80 * gib, blockAt: 1, block: block})
	f.cfg.LogBase = t.TempDir()
	f.cfg.Search.Strategy = search.Bisect
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-block; cancel() }()
	run, err := f.run(ctx)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if run.Status != record.Interrupted || !slices.Equal(f.store.finished, []record.Status{record.Interrupted}) {
		t.Errorf("status %s, stored %v", run.Status, f.store.finished)
	}
	if run.LogDir != "" || dirEntries(t, f.cfg.LogBase) != 0 {
		t.Errorf("an interrupted run kept its temporary logs in %q", run.LogDir)
	}
}

func TestRunBeforeTheFirstTrial(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *fixture, d *Deps)
		config bool   // a *hint.ConfigError
		want   string // in the message
		hint   string // in the hint
	}{
		{"limit without a GPU", func(f *fixture, d *Deps) {
			f.cfg.Group.Devices = nil
			f.cfg.MemoryLimit = limit.Limit{Bytes: 24 * gib}
		}, true, "--memory-limit: no GPU found", "NVIDIA driver"},
		{"limit above the card", func(f *fixture, d *Deps) { f.cfg.MemoryLimit = limit.Limit{Bytes: 100 * gib} }, true,
			"--memory-limit 100.00 GiB is more than the GPU's memory", "Fake GPU has 80.00 GiB"},
		{"margin without figures", func(f *fixture, d *Deps) {
			f.cfg.Group.Devices = nil
			f.cfg.Search.MarginPercent = 10
		}, true, "margin needs the memory capacity", "--margin needs GPU memory figures"},
		{"worker in the demo", func(f *fixture, d *Deps) {
			f.cfg.Worker = &WorkerOptions{}
			f.cfg.Simulated = true
		}, true, "--worker is not available in the demo", "Trial module"},
		{"worker without Python", func(f *fixture, d *Deps) {
			f.cfg.Worker = &WorkerOptions{}
			f.cfg.Framework = adapter.None{}
		}, true, "--worker needs a Python command", "batchfit.worker"},
		{"worker on parallel GPUs", func(f *fixture, d *Deps) {
			f.cfg.Worker = &WorkerOptions{}
			f.cfg.Group.Slots = [][]int{{0}, {1}}
		}, true, "cannot be combined with parallel --gpus", "leave out --worker"},
		{"executor refused", func(f *fixture, d *Deps) {
			d.Executor = func(gpugroup.Group) (probe.Executor, error) {
				return nil, hint.With(errors.New("sbatch not found"), "install Slurm")
			}
		}, false, "sbatch not found", "install Slurm"},
		{"history not writable", func(f *fixture, d *Deps) { f.store.beginErr = errors.New("disk full") }, false,
			"record the run: disk full", "--no-db"},
		{"log dir is a file", func(f *fixture, d *Deps) {
			file := filepath.Join(f.cfg.LogBase, "file")
			os.WriteFile(file, nil, 0o644)
			f.cfg.LogDir = filepath.Join(file, "logs")
		}, true, "--log-dir", "pass a --log-dir you can write to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(plain)
			f.cfg.LogBase = t.TempDir()
			deps := f.deps()
			tc.change(f, &deps)
			run, err := Run(context.Background(), f.cfg, deps)
			var ce *hint.ConfigError
			if err == nil || errors.As(err, &ce) != tc.config || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (config error %v), want %q (config error %v)", err, errors.As(err, &ce), tc.want, tc.config)
			}
			var h interface{ Hint() string }
			if !errors.As(err, &h) || !strings.Contains(h.Hint(), tc.hint) {
				t.Errorf("hint of %v does not say %q", err, tc.hint)
			}
			if run != nil || len(f.exec.tried()) != 0 || len(f.store.finished) != 0 {
				t.Errorf("run %v, %d trials, %d runs finished: something ran", run, len(f.exec.tried()), len(f.store.finished))
			}
			if dirEntries(t, f.cfg.LogBase) > 1 { // the test's own file may be there
				t.Errorf("a log folder was left under %s", f.cfg.LogBase)
			}
		})
	}
}

func TestRunMemoryLimitReachesTheTrialsAndTheSearch(t *testing.T) {
	f := newFixture(fakeTrainer{fixed: 2 * gib, perSample: 80 << 20, limit: 20 * gib})
	f.cfg.LogBase = t.TempDir()
	f.cfg.MemoryLimit = limit.Limit{Percent: 25}
	run, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if run.Settings.MemoryLimit != 20*gib || run.GPU.Capacity != 20*gib || f.progress.info.Limit != 20*gib {
		t.Errorf("limit %d, capacity %d, shown %d; want 20 GiB", run.Settings.MemoryLimit, run.GPU.Capacity, f.progress.info.Limit)
	}
	for i, env := range f.exec.envs {
		conf, _ := adapter.Lookup(env, adapter.AllocConfEnv)
		if conf != "per_process_memory_fraction:0.25" {
			t.Fatalf("trial %d: %s=%q", i+1, adapter.AllocConfEnv, conf)
		}
		if pp, _ := adapter.Lookup(env, "PYTHONPATH"); !strings.Contains(pp, "adapter") {
			t.Errorf("trial %d: the hook is not on PYTHONPATH %q", i+1, pp)
		}
	}
}

func TestRunSamplesOnlyLocalTrials(t *testing.T) {
	// A remote executor: NVML here cannot see its trials, so it is not asked.
	f := newFixture(plain)
	f.cfg.LogBase = t.TempDir()
	if _, err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.gpu.queries != 0 {
		t.Errorf("the GPU was asked %d times about remote trials", f.gpu.queries)
	}

	// Local trials, real processes: the sampler watches each one.
	f = newFixture(plain)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Command = []string{"sh", "-c", `[ "$0" -le 30 ] || { echo "torch.OutOfMemoryError: CUDA out of memory." >&2; exit 1; }`, probe.Placeholder}
	f.cfg.Framework = adapter.None{}
	f.cfg.Search.Max = 100
	deps := f.deps()
	deps.Executor = nil
	run, err := Run(context.Background(), f.cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if run.Answer != 30 || f.gpu.queries == 0 {
		t.Errorf("answer %d with %d GPU queries; want 30, sampled", run.Answer, f.gpu.queries)
	}
}

func TestRunWithoutOptionalDeps(t *testing.T) {
	// No store, GPU, display, notices or clock: the null ones stand in.
	cfg := newFixture(plain).cfg
	cfg.LogBase = t.TempDir()
	exec := &fakeExecutor{trainer: plain}
	run, err := Run(context.Background(), cfg, Deps{Executor: func(gpugroup.Group) (probe.Executor, error) { return exec, nil }})
	if err != nil || run.Answer != plain.truth(4096) || run.ID != "" {
		t.Fatalf("answer %d, id %q, err %v", run.Answer, run.ID, err)
	}
}

func TestSeedStart(t *testing.T) {
	cfg := search.Config{Min: 1, Max: 1000, MultipleOf: 8}
	for _, tc := range []struct {
		name          string
		answer        int
		near, current uint64 // capacities; 0 unknown
		want          int
	}{
		{"same card", 500, 80, 80, 448},
		{"half the memory", 500, 80, 40, 224},
		{"unknown capacity", 500, 0, 80, 448},
		{"below min", 1, 80, 80, 0},
		{"above max", 5000, 80, 80, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			near := &record.Run{Answer: tc.answer, GPU: &record.GPUInfo{Capacity: tc.near}}
			run := &record.Run{GPU: &record.GPUInfo{Capacity: tc.current}}
			if got := seedStart(near, run, cfg); got != tc.want {
				t.Errorf("seed %d, want %d", got, tc.want)
			}
		})
	}
}

func dirEntries(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(es)
}

func TestProvenFresh(t *testing.T) {
	ok := func(size int, fresh bool) search.Observation {
		return search.Observation{Size: size, Outcome: classify.OK, Retry: fresh}
	}
	oom := func(size int, fresh bool) search.Observation {
		return search.Observation{Size: size, Outcome: classify.OOM, Retry: fresh}
	}
	crash := search.Observation{Size: 41, Outcome: classify.Crash, Retry: true}
	for _, tc := range []struct {
		name string
		res  search.Result
		want bool
	}{
		{"both fresh", search.Result{Found: true, Max: 40, FirstFailure: 41, Trials: []search.Observation{ok(40, false), oom(41, false), ok(40, true), oom(41, true)}}, true},
		{"warm only", search.Result{Found: true, Max: 40, FirstFailure: 41, Trials: []search.Observation{ok(40, false), oom(41, false), ok(40, false)}}, false},
		{"failure not fresh", search.Result{Found: true, Max: 40, FirstFailure: 41, Trials: []search.Observation{ok(40, true), oom(41, false)}}, false},
		{"a crash is no failure", search.Result{Found: true, Max: 40, FirstFailure: 41, Trials: []search.Observation{ok(40, true), crash}}, false},
		{"the top of the range", search.Result{Found: true, Max: 64, Trials: []search.Observation{ok(64, true)}}, true},
		{"not found", search.Result{Max: 40, FirstFailure: 41, Trials: []search.Observation{ok(40, true), oom(41, true)}}, false},
	} {
		if got := provenFresh(tc.res); got != tc.want {
			t.Errorf("%s: provenFresh = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A settled answer replaces the warm one, with the flaky sizes of both
// above it and the conflicts of both.
func TestSettled(t *testing.T) {
	conflict := func(ok, fail int) search.Conflict {
		return search.Conflict{Ok: search.Observation{Size: ok}, Fail: search.Observation{Size: fail}}
	}
	res := search.Result{Found: true, Max: 40, FirstFailure: 41,
		Flaky:        []search.FlakySize{{Size: 41, OK: 1, Failed: 2}, {Size: 45, OK: 1, Failed: 1}},
		NonMonotonic: []search.Conflict{conflict(50, 45)}}
	st := search.Settled{Max: 40, FirstFailure: 41,
		Flaky: []search.FlakySize{{Size: 41, OK: 1, Failed: 1}}, NonMonotonic: []search.Conflict{conflict(44, 42)}}
	got := settled(res, st)
	want := []search.FlakySize{{Size: 41, OK: 2, Failed: 3}, {Size: 45, OK: 1, Failed: 1}}
	if got.Max != 40 || got.FirstFailure != 41 || !slices.Equal(got.Flaky, want) || len(got.NonMonotonic) != 2 {
		t.Errorf("settled %+v, want flaky %+v and both conflicts", got, want)
	}
	// Fresh trials fit more: the warm flaky size below the answer is gone.
	got = settled(res, search.Settled{Max: 44, FirstFailure: 45, Agreed: false})
	if want := []search.FlakySize{{Size: 45, OK: 1, Failed: 1}}; got.Max != 44 || !slices.Equal(got.Flaky, want) {
		t.Errorf("settled %d, flaky %+v; want 44, %+v", got.Max, got.Flaky, want)
	}
}

// TestCachedOnlyWhenWhatRunsMatches runs one search after another against
// the same history: each change of what runs leads to a new search (seeded
// by the stale run), and each run after an unchanged one is cached.
func TestCachedOnlyWhenWhatRunsMatches(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.yaml")
	helper := filepath.Join(dir, "helper.py")
	fixed := filepath.Join(dir, "limit.json") // opened at a fixed path
	bin := filepath.Join(dir, "bin")
	writeFile(t, conf, "width: 1\n")
	writeFile(t, helper, "WIDTH = 1\n")
	writeFile(t, fixed, "{}\n")
	os.Mkdir(bin, 0o755)
	writeExecutable := func(text string) {
		writeFile(t, filepath.Join(bin, "train"), text)
		os.Chmod(filepath.Join(bin, "train"), 0o755)
	}
	writeExecutable("#!/bin/sh\n")
	tr := plain
	tr.sources = []string{helper}
	tr.opened = []string{fixed}
	f := newFixture(tr)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Dir = dir
	f.cfg.Env = []string{"PATH=" + bin}
	f.cfg.Command = []string{"train", "conf.yaml", probe.Placeholder}
	f.git.state = &record.Git{Commit: "c1", Diff: "d1"}

	steps := []struct {
		name   string
		edit   func()
		cached bool
		notice string // in the notices of a search that found the history stale
	}{
		{"first search", func() {}, false, ""},
		{"nothing changed", func() {}, true, ""},
		{"config file edited", func() { writeFile(t, conf, "width: 2\n") }, false, ""},
		{"again", func() {}, true, ""},
		{"helper edited, size and mtime restored", func() {
			st, _ := os.Stat(helper)
			writeFile(t, helper, "WIDTH = 2\n")
			os.Chtimes(helper, st.ModTime(), st.ModTime())
		}, false, helper + " changed"},
		{"again", func() {}, true, ""},
		{"helper gone", func() { os.Remove(helper) }, false, helper + " is gone"},
		{"a file opened at a fixed path edited", func() { writeFile(t, fixed, `{"width": 2}`) }, false, fixed + " changed"},
		{"again", func() {}, true, ""},
		{"the program PATH finds edited", func() { writeExecutable("#!/bin/sh\n# edited\n") }, false, ""},
		{"again", func() {}, true, ""},
		{"another program of its name first on PATH", func() {
			other := filepath.Join(dir, "bin0")
			os.Mkdir(other, 0o755)
			writeFile(t, filepath.Join(other, "train"), "#!/bin/sh\n# edited\n")
			os.Chmod(filepath.Join(other, "train"), 0o755)
			f.cfg.Env = []string{"PATH=" + other + ":" + bin}
		}, false, ""},
		{"memory env", func() { f.cfg.Env = append(f.cfg.Env, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") }, false, ""},
		{"unrelated env", func() { f.cfg.Env = append(f.cfg.Env, "EDITOR=vi") }, true, ""},
		{"own env, not named", func() { f.cfg.Env = append(f.cfg.Env, "MYVAR=1") }, true, ""},
		{"own env named by --cache-env", func() { f.cfg.CacheEnv = []string{"MYVAR"} }, false, ""},
		{"own env changed", func() { f.cfg.Env = append(f.cfg.Env, "MYVAR=2") }, false, ""},
		{"batchfit's own env", func() { f.cfg.Env = append(f.cfg.Env, "BATCHFIT_STEPS=9") }, true, ""},
		{"uncommitted edit", func() { f.git.state = &record.Git{Commit: "c1", Diff: "d2"} }, false, ""},
		{"new commit", func() { f.git.state = &record.Git{Commit: "c2", Diff: "d2"} }, false, ""},
		{"no longer a repository", func() { f.git.state = nil }, false, ""},
		{"a month later", func() { f.clock.t = f.clock.t.Add(31 * 24 * time.Hour) }, false, "over --history-max-age"},
		{"a margin not asked before", func() { f.cfg.Search.MarginPercent = 10 }, false, "no answer for --margin 10"},
		{"the same margin", func() {}, true, ""},
		{"--cache-max-age 0", func() { f.cfg.CacheMaxAge = 0 }, false, ""},
	}
	for _, st := range steps {
		st.edit()
		before := len(f.exec.tried())
		f.notices = nil
		run, err := f.run(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		ran := len(f.exec.tried()) > before
		if run.Cached != st.cached || ran == st.cached {
			t.Fatalf("%s: cached %v after %d trials, want cached %v (notices %q)", st.name, run.Cached, len(f.exec.tried())-before, st.cached, f.notices)
		}
		if run.Cached && (run.CachedFrom == "" || run.Answer != plain.truth(4096)) {
			t.Fatalf("%s: cached from %q, answer %d", st.name, run.CachedFrom, run.Answer)
		}
		if st.notice != "" && !slices.ContainsFunc(f.notices, func(n string) bool { return strings.Contains(n, st.notice) }) {
			t.Fatalf("%s: notices %q, want one saying %q", st.name, f.notices, st.notice)
		}
		if !st.cached && len(f.store.runs) > 1 && !slices.ContainsFunc(f.notices, func(n string) bool { return strings.Contains(n, "starting at") }) {
			t.Fatalf("%s: the stale run did not seed the start: %q", st.name, f.notices)
		}
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWorstCaseOff: --worst-case off reaches every trial and the record.
func TestWorstCaseOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		f := newFixture(plain)
		f.cfg.LogBase = t.TempDir()
		f.cfg.WorstCaseOff = off
		run, err := f.run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want, env := "on", "1"
		if off {
			want, env = "off", "0"
		}
		if run.Settings.WorstCase != want {
			t.Errorf("off %v: settings say %q", off, run.Settings.WorstCase)
		}
		for i, e := range f.exec.envs {
			if v, _ := adapter.Lookup(e, adapter.WorstCaseEnv); v != env {
				t.Errorf("off %v: trial %d has %s=%q, want %q", off, i+1, adapter.WorstCaseEnv, v, env)
			}
		}
	}
}
