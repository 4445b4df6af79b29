package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// fakeFresh stands in for the fresh-process prober: sizes up to limit fit.
type fakeFresh struct {
	limit int
	mu    sync.Mutex
	calls [][]int
	phase string
	recs  []record.Trial
}

func (f *fakeFresh) Probe(ctx context.Context, req search.Request) ([]search.Observation, error) {
	sizes := req.Sizes
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, slices.Clone(sizes))
	obs := make([]search.Observation, len(sizes))
	for i, s := range sizes {
		obs[i] = search.Observation{Size: s, Outcome: classify.OK}
		if s > f.limit {
			obs[i].Outcome = classify.OOM
		}
		f.recs = append(f.recs, record.Trial{Size: s, Outcome: obs[i].Outcome, Reason: "fresh " + f.phase, Stderr: "fresh.err"})
	}
	return obs, nil
}

func (f *fakeFresh) Trials() []record.Trial {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.recs)
}

func (f *fakeFresh) SetPhase(p string) { f.phase = p }

// fakeProber returns a Prober over testdata/fakeworker.py and the file in
// which the workers log "pid size" per trial.
func fakeProber(t *testing.T, fallback search.Prober, mod func(*ProberConfig), env ...string) (*Prober, string) {
	t.Helper()
	py := findPython(t, false)
	log := filepath.Join(t.TempDir(), "trials.log")
	cfg := ProberConfig{
		Command:  []string{py, "testdata/fakeworker.py"},
		Env:      testEnv(t, append(env, "FAKE_LOG="+log)...),
		Steps:    2,
		Timeout:  20 * time.Second,
		LogDir:   t.TempDir(),
		Fallback: fallback,
	}
	if mod != nil {
		mod(&cfg)
	}
	p := NewProber(cfg)
	t.Cleanup(func() { p.Close() })
	return p, log
}

// workerRuns reads the fake workers' log: the pid of each trial, in order.
func workerRuns(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		pids = append(pids, strings.Fields(line)[0])
	}
	return pids
}

func outcomes(obs []search.Observation) []classify.Outcome {
	out := make([]classify.Outcome, len(obs))
	for i, o := range obs {
		out[i] = o.Outcome
	}
	return out
}

// phased returns cfg with its rounds' phases forwarded to p, as the search
// command does, so that p labels its trials.
func phased(cfg search.Config, p *Prober) search.Config {
	cfg.OnEvent = func(ev search.Event) {
		if ev.Kind == search.EventPlan {
			p.SetPhase(string(ev.Phase))
		}
	}
	return cfg
}

func TestRecyclePolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		keep bool
		want []classify.Outcome
		// same[i]: trial i+1 ran on the same worker as trial i
		same     []bool
		recycled []bool
	}{
		{name: "fresh worker after an OOM", env: []string{"FAKE_OOM_ABOVE=20"}, want: []classify.Outcome{"ok", "oom", "ok"},
			same: []bool{true, false}, recycled: []bool{false, true, false}},
		{name: "kept after a verified OOM", env: []string{"FAKE_OOM_ABOVE=20"}, keep: true, want: []classify.Outcome{"ok", "oom", "ok"},
			same: []bool{true, true}, recycled: []bool{false, false, false}},
		{name: "always after a failed verification", env: []string{"FAKE_RETAIN=512"}, keep: true, want: []classify.Outcome{"ok", "ok", "ok"},
			same: []bool{false, false}, recycled: []bool{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, log := fakeProber(t, nil, func(c *ProberConfig) { c.KeepAfterOOM = tc.keep }, tc.env...)
			obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{8, 32, 16}})
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(obs); !slices.Equal(got, tc.want) {
				t.Errorf("outcomes = %v", got)
			}
			if obs[0].Memory.Allocated != 9000 || obs[0].Memory.Reserved != 18000 {
				t.Errorf("memory = %+v", obs[0].Memory)
			}
			pids := workerRuns(t, log)
			for i, same := range tc.same {
				if (pids[i] == pids[i+1]) != same {
					t.Errorf("trials %d and %d on workers %s and %s, want same=%v", i+1, i+2, pids[i], pids[i+1], same)
				}
			}
			recs := p.Records()
			for i, want := range tc.recycled {
				if recs[i].Recycled != want {
					t.Errorf("record %d recycled = %v (%s), want %v", i+1, recs[i].Recycled, recs[i].RecycleReason, want)
				}
				if recs[i].N != i+1 || recs[i].Result == nil || recs[i].WorkerPID == 0 || recs[i].Fresh {
					t.Errorf("record %d = %+v", i+1, recs[i])
				}
			}
		})
	}
}

// A failed verification warns once, with the size of the leak.
func TestRecycleWarnsOnce(t *testing.T) {
	var warnings []string
	p, _ := fakeProber(t, nil, func(c *ProberConfig) { c.Warn = func(m string) { warnings = append(warnings, m) } }, "FAKE_RETAIN=2048")
	if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{8, 16}}); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "kept 2.0 KiB") || !strings.Contains(warnings[0], "batchfit doctor") {
		t.Errorf("warnings = %q", warnings)
	}
	ws := p.Workers()
	if len(ws) != 2 || !strings.Contains(ws[0].Retired, "2.0 KiB") || ws[0].Hello.Device != "Fake GPU" || ws[0].Stderr == "" {
		t.Errorf("workers = %+v", ws)
	}
}

// A warm crash is re-run in a fresh process, which decides.
func TestCrashIsRerunFresh(t *testing.T) {
	fresh := &fakeFresh{limit: 100}
	p, _ := fakeProber(t, fresh, nil, "FAKE_MODE=die")
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}})
	if err != nil {
		t.Fatal(err)
	}
	if obs[0].Outcome != classify.OK || len(fresh.calls) != 1 || fresh.calls[0][0] != 8 {
		t.Errorf("obs = %+v, fresh calls %v", obs, fresh.calls)
	}
	recs := p.Records()
	if len(recs) != 2 || !recs[0].Superseded || recs[0].Outcome != classify.Crash || !recs[0].Recycled || !recs[1].Fresh || recs[1].N != 2 {
		t.Fatalf("records = %+v", recs)
	}
	ts := p.Trials()
	if ts[0].Outcome != classify.Crash || !strings.Contains(ts[0].Tail, "segfault coming") || ts[1].Stderr != "fresh.err" || ts[1].N != 2 {
		t.Errorf("trials = %+v", ts)
	}
}

// search.Run's confirmation runs (search.Request.Fresh) go to fresh processes; the
// rest to the warm worker. The answer is confirmed fresh at the end.
func TestSearchWithConfirmation(t *testing.T) {
	fresh := &fakeFresh{limit: 20}
	var done []record.Trial
	p, log := fakeProber(t, fresh, func(c *ProberConfig) {
		c.OnDone = func(tr record.Trial) { done = append(done, tr) }
	}, "FAKE_OOM_ABOVE=20")
	cfg := phased(search.Config{Min: 1, Max: 64, Strategy: search.Bisect, Confirm: 1}, p)
	res, err := search.Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Max != 20 || res.FirstFailure != 21 {
		t.Fatalf("max %d, first failure %d", res.Max, res.FirstFailure)
	}
	// The proof pair's re-check (20, then 21 until it failed four times:
	// one trial at a time) and the confirmation of 20 run fresh.
	if !slices.EqualFunc(fresh.calls, [][]int{{20}, {21}, {21}, {21}, {20}}, slices.Equal) || fresh.phase != "confirm" {
		t.Errorf("fresh calls %v (phase %q), want the re-check of 20 and 21, then the confirmation of 20", fresh.calls, fresh.phase)
	}
	warm := len(workerRuns(t, log))
	if warm+5 != len(p.Records()) || len(done) != warm {
		t.Errorf("%d warm trials, %d records, %d OnDone", warm, len(p.Records()), len(done))
	}
	last := p.Records()[len(p.Records())-1]
	if !last.Fresh || last.Phase != "confirm" || last.Size != 20 {
		t.Errorf("last record = %+v", last)
	}

	st, err := search.Settle(context.Background(), cfg, p, res.Max, res.FirstFailure)
	if err != nil || !st.Agreed || st.Max != 20 || st.FirstFailure != 21 || len(st.Trials) != 7 {
		t.Errorf("settled = %+v, %v", st, err)
	}
	// Settling proves and confirms as the search does, all fresh.
	want := [][]int{{20, 21}, {20}, {21}, {21}, {21}, {20}}
	if len(fresh.calls) != 11 || !slices.EqualFunc(fresh.calls[5:], want, slices.Equal) || len(workerRuns(t, log)) != warm {
		t.Errorf("fresh calls %v and %d warm trials, want the settling of 20 and 21 fresh", fresh.calls, len(workerRuns(t, log)))
	}
}

// search.Settle over the warm Prober runs every trial through the
// fallback, labelled "confirm", and moves a warm answer that fresh
// processes do not confirm.
func TestSettleThroughFallback(t *testing.T) {
	for _, tc := range []struct {
		name            string
		limit           int // fresh processes fit sizes up to this
		cfg             search.Config
		answer, first   int
		want, wantFirst int
		agreed          bool
		probes          [][]int
		err             error
	}{
		{name: "agree", limit: 20, cfg: search.Config{Min: 1, Max: 64}, answer: 20, first: 21,
			want: 20, wantFirst: 21, agreed: true, probes: [][]int{{20, 21}, {20}, {21}, {21}, {21}}},
		{name: "fresh fits less", limit: 18, cfg: search.Config{Min: 1, Max: 64}, answer: 20, first: 21,
			want: 18, wantFirst: 19, probes: [][]int{{20, 21}, {19}, {18}, {18}, {19}, {19}, {19}}},
		{name: "fresh fits more", limit: 25, cfg: search.Config{Min: 1, Max: 64}, answer: 20, first: 21,
			want: 25, wantFirst: 26, probes: [][]int{{20, 21}, {22}, {23}, {25}, {29}, {27}, {26}, {25}, {26}, {26}, {26}}},
		{name: "on the grid", limit: 90, cfg: search.Config{Min: 8, Max: 1024, MultipleOf: 8}, answer: 96, first: 104,
			want: 88, wantFirst: 96, probes: [][]int{{96, 104}, {88}, {88}, {96}, {96}, {96}}},
		{name: "the top fits", limit: 100, cfg: search.Config{Min: 1, Max: 64}, answer: 64,
			want: 64, agreed: true, probes: [][]int{{64}, {64}}},
		{name: "fresh fits up to the top", limit: 100, cfg: search.Config{Min: 1, Max: 64}, answer: 60, first: 61,
			want: 64, probes: [][]int{{60, 61}, {62}, {63}, {64}, {64}}},
		{name: "nothing fits fresh", limit: 0, cfg: search.Config{Min: 19, Max: 64}, answer: 20, first: 21,
			probes: [][]int{{20, 21}, {19}}, err: search.ErrNothingFits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh := &fakeFresh{limit: tc.limit}
			// No command: a warm trial would fail to start.
			p := NewProber(ProberConfig{Fallback: fresh})
			st, err := search.Settle(context.Background(), phased(tc.cfg, p), p, tc.answer, tc.first)
			if !slices.EqualFunc(fresh.calls, tc.probes, slices.Equal) {
				t.Errorf("fresh calls %v, want %v", fresh.calls, tc.probes)
			}
			recs := p.Records()
			if len(recs) != len(st.Trials) {
				t.Errorf("%d records for %d trials", len(recs), len(st.Trials))
			}
			for _, r := range recs {
				if !r.Fresh || r.Phase != "confirm" || r.Trial().Reason != "fresh confirm" {
					t.Errorf("record %+v: want fresh, labelled confirm here and in the fallback", r)
				}
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Errorf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || st.Max != tc.want || st.FirstFailure != tc.wantFirst || st.Agreed != tc.agreed {
				t.Errorf("settled = %+v, %v", st, err)
			}
		})
	}
}

// Without a fallback, a fresh trial runs on a worker of its own.
func TestFreshWithoutFallback(t *testing.T) {
	p, log := fakeProber(t, nil, nil)
	if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}}); err != nil {
		t.Fatal(err)
	}
	st, err := search.Settle(context.Background(), search.Config{Min: 1, Max: 8}, p, 8, 0)
	if err != nil || !st.Agreed {
		t.Fatalf("settled = %+v, %v", st, err)
	}
	// Settling runs 8 twice, each time on a worker of its own.
	pids := workerRuns(t, log)
	if len(pids) != 3 || pids[0] == pids[1] || pids[1] == pids[2] {
		t.Errorf("worker pids %v: each confirmation must run on a new worker", pids)
	}
	if ws := p.Workers(); len(ws) != 3 || slices.ContainsFunc(ws, func(w WorkerInfo) bool { return w.Retired == "" }) {
		t.Errorf("workers = %+v", ws)
	}
}

// A worker that cannot start is an error for the search; a canceled
// context is a canceled observation.
func TestProberStartFailureAndCancel(t *testing.T) {
	p, _ := fakeProber(t, nil, nil, "FAKE_MODE=fatal")
	_, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}})
	if err == nil || !strings.Contains(err.Error(), "cannot read the dataset config") {
		t.Errorf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	obs, err := p.Probe(ctx, search.Request{Sizes: []int{8, 16}})
	if err != nil || len(obs) != 2 || obs[0].Outcome != classify.Canceled {
		t.Errorf("obs = %+v, err = %v", obs, err)
	}
}

// The recycle policy with the real worker: a Trial that keeps its failed
// batch fails verification after the OOM, and the next trial runs on a new
// worker whose memory is back at the baseline.
func TestRecycleRealWorker(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	p := NewProber(ProberConfig{
		Command:      []string{py, "-m", "batchfit.worker", "trials:KeepsFailedBatch"},
		Env:          testEnv(t, "TRIAL_OOM_ABOVE=100"),
		Steps:        1,
		Timeout:      time.Minute,
		KeepAfterOOM: true, // the verification alone must recycle
	})
	defer p.Close()
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{200, 777}})
	if err != nil {
		t.Fatal(err)
	}
	if obs[0].Outcome != classify.OOM || obs[1].Outcome != classify.OK {
		t.Fatalf("outcomes %v: the check on the new worker must find nothing alive", outcomes(obs))
	}
	recs := p.Records()
	if !recs[0].Recycled || recs[0].Result.Verified || recs[0].Result.RetainedBytes != 200*16*4 {
		t.Errorf("first record = %+v, result %+v", recs[0], recs[0].Result)
	}
	if recs[0].WorkerPID == recs[1].WorkerPID || !recs[1].Result.Verified {
		t.Errorf("records = %+v", recs)
	}
}

// The whole path on CPU torch: search.Run over the warm Prober, the
// fresh-process prober as its fallback (the same command, which runs one
// trial at BATCHFIT_BATCH_SIZE when it has no channel), and the fresh
// confirmation of the answer and its first failure.
func TestWarmSearchOnCPU(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	dir := t.TempDir()
	pp := pythonPath(t)
	var base []string
	for _, kv := range testEnv(t, "TRIAL_OOM_ABOVE=100") {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			base = append(base, kv)
		}
	}
	argv := []string{py, "-m", "batchfit.worker", "trials:Clean"}
	fresh := probe.New(probe.Config{Command: argv, Env: base, PythonPath: pp, Steps: 2, Timeout: time.Minute, LogDir: dir, Framework: adapter.Torch{}})
	p := NewProber(ProberConfig{Command: argv, Env: Environ(base, pp, adapter.None{}, 0, 0), Steps: 2, Timeout: time.Minute,
		LogDir: dir, KeepAfterOOM: true, Fallback: fresh})
	defer p.Close()
	cfg := phased(search.Config{Min: 1, Max: 1024, Strategy: search.Bisect}, p)
	res, err := search.Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Max != 100 || res.FirstFailure != 101 {
		t.Fatalf("max %d, first failure %d", res.Max, res.FirstFailure)
	}
	st, err := search.Settle(context.Background(), cfg, p, res.Max, res.FirstFailure)
	if err != nil || !st.Agreed || st.Trials[1].Outcome != classify.OOM {
		t.Fatalf("settled %+v, %v", st, err)
	}
	if ws := p.Workers(); len(ws) != 1 {
		t.Errorf("%d workers, want one kept through verified OOMs: %+v", len(ws), ws)
	}
	ts := p.Trials()
	last := ts[len(ts)-1]
	if last.Size != 101 || last.Outcome != classify.OOM || last.Phase != "confirm" || last.N != len(ts) || last.Stderr == "" {
		t.Errorf("last trial = %+v", last)
	}
}

// A soak (--soak) of a warm search's answer runs in a fresh process with
// the GPU to itself: the idle worker is gone before it starts. On CPU
// torch, the fresh process runs the Trial until the soak's SIGTERM, many
// steps more than a trial's.
func TestWarmSoakOnCPU(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	dir := t.TempDir()
	// The adapter's hook too (pythonPath has only the package): it answers
	// the soak's SIGTERM with its report.
	pp, err := adapter.Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	td, _ := filepath.Abs("testdata")
	pp += string(os.PathListSeparator) + td
	var base []string
	for _, kv := range testEnv(t) {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			base = append(base, kv)
		}
	}
	argv := []string{py, "-m", "batchfit.worker", "trials:Clean"}
	fresh := probe.New(probe.Config{Command: argv, Env: base, PythonPath: pp, Steps: 2, Timeout: time.Minute, LogDir: dir, Framework: adapter.Torch{}})
	spy := &soakSpy{Prober: fresh}
	p := NewProber(ProberConfig{Command: argv, Env: Environ(base, pp, adapter.None{}, 0, 0), Steps: 2, Timeout: time.Minute,
		LogDir: dir, Fallback: spy})
	defer p.Close()
	if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{50}}); err != nil {
		t.Fatal(err)
	}
	pid := p.Records()[0].WorkerPID
	spy.before = func() {
		if alive(pid) {
			t.Errorf("the warm worker (pid %d) still runs when the soak starts", pid)
		}
	}
	// The soak starts a fresh process, whose import of torch takes as long
	// as the machine's load makes it: give it a few times what the first
	// trial (start-up and two steps) took, so it always gets to step on.
	first := time.Duration(p.Trials()[0].Seconds * float64(time.Second))
	tr, err := p.Soak(context.Background(), 50, max(5*time.Second, 4*first))
	if err != nil {
		t.Fatal(err)
	}
	if tr.N != 2 || tr.Phase != record.PhaseSoak || tr.Outcome != classify.OK || !strings.Contains(tr.Reason, "soaked") || tr.Steps <= 3 {
		t.Errorf("soak trial = %+v, want trial 2, ok, soaked, more steps than a trial's", tr)
	}
	if ts := p.Trials(); len(ts) != 2 || ts[1].N != 2 || ts[1].Phase != record.PhaseSoak {
		t.Errorf("trials = %+v", ts)
	}
	if ws := p.Workers(); len(ws) != 1 || !strings.Contains(ws[0].Retired, "soak") {
		t.Errorf("workers = %+v, want the one retired for the soak", ws)
	}
}

// soakSpy is the fresh-process prober, with a look before each soak.
type soakSpy struct {
	*probe.Prober
	before func()
}

func (s *soakSpy) Soak(ctx context.Context, size int, d time.Duration) (record.Trial, error) {
	if s.before != nil {
		s.before()
	}
	return s.Prober.Soak(ctx, size, d)
}

// A fallback that cannot soak is an error, not a silent warm soak.
func TestSoakNeedsAFreshProber(t *testing.T) {
	t.Parallel()
	p, _ := fakeProber(t, &fakeFresh{limit: 100}, nil)
	if _, err := p.Soak(context.Background(), 10, time.Second); err == nil || !strings.Contains(err.Error(), "no fresh-process prober") {
		t.Errorf("err = %v", err)
	}
}

// With Standby, the worker that replaces one retired after an OOM was
// started while the old one ran, and the standby left at the end is
// stopped by Close.
func TestStandbyWorker(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	p := NewProber(ProberConfig{
		Command: []string{py, "-m", "batchfit.worker", "trials:Clean"},
		Env:     testEnv(t, "TRIAL_OOM_ABOVE=100"),
		Steps:   1,
		Timeout: time.Minute,
		Standby: true,
	})
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{50, 200, 60}})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(obs); got[0] != classify.OK || got[1] != classify.OOM || got[2] != classify.OK {
		t.Fatalf("outcomes %v", got)
	}
	recs := p.Records()
	if recs[0].WorkerPID != recs[1].WorkerPID || recs[2].WorkerPID == recs[1].WorkerPID || !recs[1].Recycled {
		t.Errorf("records = %+v", recs)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	ws := p.Workers()
	if len(ws) != 3 || (ws[2].Retired != "not needed" && ws[2].Retired != "did not start") {
		t.Fatalf("workers = %+v: the first, its standby that took over, and a standby stopped at Close", ws)
	}
	for _, w := range ws {
		if w.PID > 0 && syscall.Kill(w.PID, 0) == nil {
			t.Errorf("worker %d (pid %d) still runs after Close", w.N, w.PID)
		}
	}
}

// A warm trial's out-of-memory figures reach the search as a fresh trial's
// would: under a cap below the device, what the cap left free; else the
// device's free memory. Without figures, none.
func TestWarmFailureFigures(t *testing.T) {
	const gib = 1 << 30
	req := &adapter.OOMRequest{Bytes: 56 << 20, Limit: 24 * gib, Free: 100 * gib, Allocated: 23 * gib, Reserved: 23*gib + 900<<20}
	capped := failureOf(Result{Outcome: classify.OOM, OOMRequest: req}, 140*gib)
	if want := (search.Failure{Request: 56 << 20, Allocated: 23 * gib, Reserved: 23*gib + 900<<20, Free: 124 << 20,
		Capped: true, Exact: true}); capped != want {
		t.Errorf("capped: %+v, want %+v", capped, want)
	}
	whole := *req
	whole.Limit = 140 * gib
	if f := failureOf(Result{Outcome: classify.OOM, OOMRequest: &whole}, 140*gib); f.Capped || f.Free != 100*gib {
		t.Errorf("whole card: %+v, want the device's free memory, not capped", f)
	}
	if f := failureOf(Result{Outcome: classify.OOM}, 140*gib); f != (search.Failure{}) {
		t.Errorf("no figures: %+v", f)
	}
	if f := failureOf(Result{Outcome: classify.OK, OOMRequest: req}, 140*gib); f != (search.Failure{}) {
		t.Errorf("a trial that fitted: %+v", f)
	}
}
