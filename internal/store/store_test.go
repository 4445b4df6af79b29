package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/record"
)

// childEnv switches the test binary into a writer that the SIGKILL test runs
// as a separate process and kills mid-run.
const childEnv = "BATCHFIT_STORE_TEST_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		if err := childWriter(path); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childWriter begins a run, prints its id, then stores trials and prints
// each number once it is committed, until it is killed (or, if the parent is
// gone, its stdout breaks).
func childWriter(path string) error {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		return err
	}
	run := sampleRun()
	run.Trials = nil
	if err := s.BeginRun(ctx, run); err != nil {
		return err
	}
	if _, err := fmt.Println(run.ID); err != nil {
		return err
	}
	for n := 1; n < 1_000_000; n++ {
		t := sampleTrial(n)
		if err := s.AddTrial(ctx, run.ID, t); err != nil {
			return err
		}
		if _, err := fmt.Println(n); err != nil {
			return err
		}
	}
	return nil
}

func sampleTrial(n int) record.Trial {
	return record.Trial{
		N: n, Size: 32 * n, Outcome: classify.OK, Seconds: 9.5 + float64(n),
		ExitCode: 0, Phase: "bracket", GPUs: []int{0},
		Allocated: 10 << 30, Reserved: 11 << 30, Device: 12 << 30,
		StepTimes: []float64{0.31, 0.30, 0.29},
		Stdout:    "/tmp/logs/" + strconv.Itoa(n) + ".out", Stderr: "/tmp/logs/" + strconv.Itoa(n) + ".err",
	}
}

// sampleRun has every field set, so a round trip that drops one shows.
func sampleRun() *record.Run {
	start := time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)
	return &record.Run{
		Status:    record.Running,
		Started:   start,
		Command:   []string{"python", "train.py", "--batch-size", "{}", "--max-steps", "3"},
		Dir:       "/home/u/proj",
		Simulated: false,
		Settings: record.Settings{
			Min: 1, Max: 4096, Start: 64, MultipleOf: 2, Steps: 3, Strategy: "model",
			Confirm: 2, TimeoutSecs: 600, MemoryLimit: 24 << 30, Margin: 5, Parallel: 1, Framework: "torch",
		},
		GPU: &record.GPUInfo{
			Devices: []gpu.Device{{Index: 0, UUID: "GPU-1234", Name: "NVIDIA H200", Total: 150 << 30,
				Driver: "580.65", CUDA: "13.0"}},
			Capacity: 24 << 30,
		},
		Torch:   "2.11.0",
		Version: "0.1.0",
		Trials: []record.Trial{
			sampleTrial(1),
			{N: 2, Size: 512, Outcome: classify.OOM, Reason: "CUDA out of memory. Tried to allocate 2.00 GiB",
				Seconds: 11, ExitCode: 1, Phase: "bracket", Tail: "torch.OutOfMemoryError: CUDA out of memory"},
			{N: 3, Size: 282, Outcome: classify.OK, Seconds: 12.25, Retry: true, Phase: "refine",
				Allocated: 23 << 30, StepTimes: []float64{0.5}},
			{N: 4, Size: 283, Outcome: classify.Crash, Seconds: 1, ExitCode: -1, Signal: "SIGSEGV",
				Phase: "refine", Tail: "Segmentation fault"},
		},
		Rounds:       7,
		NonMonotonic: []record.Pair{{OK: 282, Fail: 270}},
		Model:        &record.Model{Figure: "allocated", Intercept: 1.5e9, Slope: 8.1e7, Residual: 3e6},
		Error:        "",
		LogDir:       "/tmp/logs",
		Warnings:     []string{"no NVML: memory not sampled"},
	}
}

// finish turns r into a finished run the way the CLI would.
func finish(r *record.Run, answer int) {
	r.Status = record.Found
	r.Answer = answer
	r.FirstFailure = answer + 1
	r.Margin = answer - 14
	r.Recommended = answer - 26
	r.Finished = r.Started.Add(203 * time.Second)
	r.Seconds = 203
}

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "batchfit.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// rawDB opens the file with plain SQL, outside the store, as a second
// process would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func integrityOK(t *testing.T, path string) {
	t.Helper()
	var res string
	if err := rawDB(t, path).QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check = %q", res)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := sampleRun()
	trials := run.Trials
	run.Trials = nil
	if err := s.BeginRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if len(run.ID) != idLen {
		t.Fatalf("id %q: want %d characters", run.ID, idLen)
	}
	// Out of order on purpose: the store returns trials in order of N.
	for _, i := range []int{1, 0, 3, 2} {
		if err := s.AddTrial(ctx, run.ID, trials[i]); err != nil {
			t.Fatal(err)
		}
	}
	mid, err := s.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if mid.Status != record.Running || len(mid.Trials) != 4 {
		t.Fatalf("mid-run: status %s, %d trials; want running, 4", mid.Status, len(mid.Trials))
	}

	run.Trials = trials
	finish(run, 282)
	if err := s.FinishRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, run) {
		t.Errorf("round trip differs\n got %+v\nwant %+v", got, run)
	}
	if got.Fingerprint != Fingerprint(run) || got.Fingerprint == "" {
		t.Errorf("fingerprint %q, want %q", got.Fingerprint, Fingerprint(run))
	}
}

func TestFinishRunStoresTrialsNotAddedBefore(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := sampleRun()
	trials := run.Trials
	run.Trials = nil
	if err := s.BeginRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTrial(ctx, run.ID, trials[0]); err != nil {
		t.Fatal(err)
	}
	// The final record carries only the later trials; the first stays.
	run.Trials = trials[1:]
	finish(run, 282)
	if err := s.FinishRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Trials, trials) {
		t.Errorf("trials\n got %+v\nwant %+v", got.Trials, trials)
	}
	if err := s.AddTrial(ctx, run.ID, sampleTrial(9)); err == nil {
		t.Error("AddTrial to a finished run: no error")
	}
}

func TestWriteErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if err := s.AddTrial(ctx, "0000000000zz", sampleTrial(1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddTrial to unknown run: %v, want ErrNotFound", err)
	}
	run := sampleRun()
	run.Trials = nil
	if err := s.BeginRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTrial(ctx, run.ID, record.Trial{N: 0}); err == nil {
		t.Error("AddTrial with N 0: no error")
	}
	run.Status = record.Running
	if err := s.FinishRun(ctx, run); err == nil {
		t.Error("FinishRun with status running: no error")
	}
	ghost := sampleRun()
	ghost.ID, ghost.Status = "0000000000zz", record.Found
	if err := s.FinishRun(ctx, ghost); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishRun of unknown run: %v, want ErrNotFound", err)
	}
}

func TestFinishRunAfterCancel(t *testing.T) {
	// Ctrl-C cancels the context; the run must still be recorded.
	s, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	run := sampleRun()
	run.Trials = nil
	if err := s.BeginRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	cancel()
	canceled := record.Trial{N: 1, Size: 64, Outcome: classify.Canceled}
	if err := s.AddTrial(ctx, run.ID, canceled); err != nil {
		t.Fatalf("AddTrial after cancel: %v", err)
	}
	run.Status = record.Interrupted
	if err := s.FinishRun(ctx, run); err != nil {
		t.Fatalf("FinishRun after cancel: %v", err)
	}
	got, err := s.Get(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != record.Interrupted || len(got.Trials) != 1 {
		t.Errorf("got status %s with %d trials, want interrupted with 1", got.Status, len(got.Trials))
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "batchfit")
	path := filepath.Join(dir, "batchfit.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := sampleRun()
	if err := s.BeginRun(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{dir, 0o700 | os.ModeDir},
		{filepath.Dir(dir), 0o700 | os.ModeDir},
		{path, 0o600},
		{path + "-wal", 0o600},
		{path + "-shm", 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode() != c.want {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.want)
		}
	}
}

func TestExistingDirKeepsItsMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), filepath.Join(dir, "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("existing dir changed to %v", fi.Mode().Perm())
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	run := sampleRun()
	if err := s.BeginRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	finish(run, 282)
	if err := s.FinishRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	got, err := s2.Get(ctx, run.ID)
	if err != nil || got.Answer != 282 {
		t.Fatalf("after reopen: %v, %v", got, err)
	}
}

func TestAwkwardPath(t *testing.T) {
	// Characters that mean something in a SQLite URI must reach the file
	// system as they are.
	dir := filepath.Join(t.TempDir(), "a?b#c%41 d")
	path := filepath.Join(dir, "x.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.BeginRun(context.Background(), sampleRun()); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "x.db") {
			t.Errorf("unexpected file %q beside the database", e.Name())
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("database not written at %s: %v", path, err)
	}
}

func TestGetPrefix(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	db := s.db
	for _, id := range []string{"0abc00000001", "0abc00000002", "0abd00000003"} {
		r := sampleRun()
		r.Trials = nil
		if err := s.BeginRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE runs SET id = ? WHERE id = ?`, id, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		in   string
		want string
		err  error
	}{
		{"0abc00000001", "0abc00000001", nil},
		{"0ABD", "0abd00000003", nil},
		{" 0abd0 ", "0abd00000003", nil},
		{"0abc", "", ErrAmbiguous},
		{"0ab", "", ErrAmbiguous},
		{"0abe", "", ErrNotFound},
		{"", "", ErrNotFound},
		{"0abc%", "", ErrNotFound},
		{"0abc000000011", "", ErrNotFound},
	} {
		got, err := s.Get(ctx, c.in)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Get(%q): %v, want %v", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got.ID != c.want {
			t.Errorf("Get(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestIDs(t *testing.T) {
	a := newID(time.UnixMilli(1_700_000_000_000))
	b := newID(time.UnixMilli(1_700_000_000_001))
	c := newID(time.UnixMilli(1_800_000_000_000))
	if !(a < b && b < c) {
		t.Errorf("ids do not sort by time: %s %s %s", a, b, c)
	}
	seen := map[string]bool{}
	now := time.Now()
	for range 50 {
		id := newID(now)
		if len(id) != idLen {
			t.Fatalf("id %q has length %d", id, len(id))
		}
		if _, ok := normalizeID(id); !ok {
			t.Fatalf("id %q is not valid", id)
		}
		seen[id] = true
	}
	// 15 random bits: 50 draws all colliding into few values would mean
	// the tail is not random.
	if len(seen) < 40 {
		t.Errorf("only %d distinct ids in 50 from the same millisecond", len(seen))
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 4 {
		r := sampleRun()
		r.Started = base.Add(time.Duration(i) * time.Hour)
		if err := s.BeginRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			finish(r, 100+i)
			if err := s.FinishRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, r.ID)
	}
	all, err := s.List(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("List(0): %d runs, want 4", len(all))
	}
	for i, r := range all {
		want := ids[3-i]
		if r.ID != want {
			t.Errorf("List[%d] = %s, want %s (newest first)", i, r.ID, want)
		}
		if len(r.Trials) != 4 {
			t.Errorf("List[%d]: %d trials, want 4", i, len(r.Trials))
		}
	}
	// Ours and alive: still running.
	if all[0].Status != record.Running {
		t.Errorf("live run listed as %s", all[0].Status)
	}
	two, err := s.List(ctx, 2)
	if err != nil || len(two) != 2 || two[0].ID != ids[3] {
		t.Errorf("List(2) = %d runs, %v", len(two), err)
	}
}

func TestCachedAndNearest(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(hour int, status record.Status, answer int, edit func(*record.Run)) *record.Run {
		t.Helper()
		r := sampleRun()
		r.Started = base.Add(time.Duration(hour) * time.Hour)
		if edit != nil {
			edit(r)
		}
		if err := s.BeginRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if status != record.Running {
			finish(r, answer)
			r.Status = status
			if err := s.FinishRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	otherGPU := func(r *record.Run) { r.GPU.Devices[0].Name = "NVIDIA A100"; r.GPU.Devices[0].Total = 80 << 30 }
	otherCmd := func(r *record.Run) { r.Command = []string{"python", "other.py", "{}"} }

	old := add(0, record.Found, 280, nil)
	want := add(1, record.Found, 282, nil)
	add(2, record.Failed, 0, nil)                                      // newer, but failed
	add(3, record.Interrupted, 0, nil)                                 // newer, but interrupted
	add(4, record.Running, 0, nil)                                     // newer, still running
	add(5, record.Found, 300, func(r *record.Run) { r.Cached = true }) // answered from the cache
	add(5, record.Found, 250, func(r *record.Run) {                    // flaky: not exact
		r.Flaky = []record.FlakySize{{Size: 251, OK: 1, Failed: 1}}
	})
	add(5, record.Found, 240, func(r *record.Run) { // at risk: not exact
		r.AtRisk = &record.Risk{Size: 241, From: 246, ShortfallBytes: 1 << 30, SlopeBytes: 1 << 27}
	})
	add(5, record.Found, 284, func(r *record.Run) { // a whole-process limit proven capped: a real card may not run it
		r.Proof = record.ProofCapped
		r.Settings.MemoryLimitScope = record.ScopeProcess
	})
	a100 := add(6, record.Found, 120, otherGPU)
	add(7, record.Found, 999, otherCmd)
	_ = old

	fp := Fingerprint(sampleRun())
	got, err := s.Cached(ctx, fp)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.ID != want.ID || got.Answer != 282 || len(got.Trials) != 4 {
		t.Fatalf("Cached = %+v, want run %s with answer 282 and its trials", got, want.ID)
	}
	got, err = s.Cached(ctx, Fingerprint(a100))
	if err != nil || got == nil || got.ID != a100.ID {
		t.Fatalf("Cached(A100) = %v, %v; want %s", got, err, a100.ID)
	}
	miss := sampleRun()
	miss.Settings.MemoryLimit = 16 << 30
	if got, err := s.Cached(ctx, Fingerprint(miss)); got != nil || err != nil {
		t.Fatalf("Cached(other limit) = %v, %v; want nil, nil", got, err)
	}

	near, err := s.Nearest(ctx, CommandKey(miss))
	if err != nil {
		t.Fatal(err)
	}
	if near == nil || near.ID != a100.ID {
		t.Fatalf("Nearest = %v, want the newest found run of the command (%s)", near, a100.ID)
	}
	if near, err := s.Nearest(ctx, CommandKey(&record.Run{Command: []string{"none"}})); near != nil || err != nil {
		t.Fatalf("Nearest(unknown) = %v, %v; want nil, nil", near, err)
	}

	// cache clear takes the found runs out of use, not out of the history.
	n, err := s.ClearCache(ctx)
	if err != nil || n != 4 {
		t.Fatalf("ClearCache = %d, %v; want 4 runs", n, err)
	}
	if got, err := s.Cached(ctx, fp); got != nil || err != nil {
		t.Fatalf("Cached after ClearCache = %v, %v; want nil, nil", got, err)
	}
	if near, err := s.Nearest(ctx, CommandKey(miss)); err != nil || near == nil || near.ID != a100.ID {
		t.Fatalf("Nearest after ClearCache = %v, %v; want %s", near, err, a100.ID)
	}
	if _, err := s.Get(ctx, want.ID); err != nil {
		t.Fatalf("Get after ClearCache: %v", err)
	}
	// A run found after the clear is used again.
	again := add(8, record.Found, 283, nil)
	if got, err := s.Cached(ctx, fp); err != nil || got == nil || got.ID != again.ID {
		t.Fatalf("Cached after a new run = %v, %v; want %s", got, err, again.ID)
	}
}

// TestMigrateSchema1 opens a database written before the cache could be
// cleared: its runs stay and are usable as cached answers.
func TestMigrateSchema1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "batchfit.db")
	db := rawDB(t, path)
	if _, err := db.Exec(migrations[0]); err != nil {
		t.Fatal(err)
	}
	r := sampleRun()
	finish(r, 282)
	r.ID, r.Fingerprint = "r1", Fingerprint(r)
	body, err := runJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO runs (id, fingerprint, command_key, status, started, updated, answer, gpu_name, cached,
		owner_pid, owner_start, owner_boot, owner_host, json) VALUES (?, ?, ?, 'found', 1, 1, 282, '', 0, 1, 1, '', '', ?)`,
		r.ID, r.Fingerprint, CommandKey(r), body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA application_id=%d; PRAGMA user_version=1", applicationID)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Cached(ctx, r.Fingerprint); err != nil || got == nil || got.ID != "r1" {
		t.Fatalf("Cached after migration = %v, %v; want r1", got, err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	got, err := DefaultPath()
	if err != nil || got != "/x/cache/batchfit/batchfit.db" {
		t.Errorf("DefaultPath = %q, %v", got, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	want, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache dir on this platform: %v", err)
	}
	got, err = DefaultPath()
	if err != nil || got != filepath.Join(want, "batchfit", "batchfit.db") {
		t.Errorf("DefaultPath = %q, %v; want under %s", got, err, want)
	}
}

func TestCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	garbage := filepath.Join(dir, "garbage.db")
	junk := []byte(strings.Repeat("this is not a database\x00\xff", 400))
	if err := os.WriteFile(garbage, junk, 0o600); err != nil {
		t.Fatal(err)
	}

	foreign := filepath.Join(dir, "foreign.db")
	db := rawDB(t, foreign)
	if _, err := db.Exec(`CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	foreignBytes, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}

	// A damaged batchfit db: a valid header, then pages overwritten.
	damaged := filepath.Join(dir, "damaged.db")
	s, err := Open(ctx, damaged)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		r := sampleRun()
		r.Started = r.Started.Add(time.Duration(i) * time.Minute)
		if err := s.BeginRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	b, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4096; i < len(b); i++ {
		b[i] = 0xa5
	}
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, path string
		use        bool // the damage may only show when the data is read
	}{
		{"garbage", garbage, false},
		{"foreign schema", foreign, false},
		{"damaged pages", damaged, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(ctx, c.path)
			if err == nil && c.use {
				_, err = s.List(ctx, 0)
				s.Close()
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), c.path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	// A foreign database is refused, not converted or written into.
	after, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(foreignBytes) {
		t.Error("Open changed the foreign database")
	}
	if _, err := os.Stat(foreign + "-wal"); err == nil {
		t.Error("Open left a WAL file beside the foreign database")
	}
}

func TestNewerSchema(t *testing.T) {
	s, path := openTemp(t)
	s.Close()
	if _, err := rawDB(t, path).Exec(fmt.Sprintf("PRAGMA user_version=%d", len(migrations)+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), path); !errors.Is(err, ErrNewer) {
		t.Fatalf("err = %v, want ErrNewer", err)
	}
}

func TestLocked(t *testing.T) {
	ctx := context.Background()
	t.Run("open", func(t *testing.T) {
		t.Parallel()
		s, path := openTemp(t)
		s.Close()
		holdExclusive(t, path)
		err := notHung(t, func() error {
			s, err := Open(ctx, path)
			if err == nil {
				s.Close()
			}
			return err
		})
		checkLocked(t, err, path)
	})
	t.Run("write", func(t *testing.T) {
		t.Parallel()
		s, path := openTemp(t)
		holdExclusive(t, path)
		err := notHung(t, func() error { return s.BeginRun(ctx, sampleRun()) })
		checkLocked(t, err, path)
	})
}

// holdExclusive takes the write lock in a second connection, as another
// process would, until the test ends.
func holdExclusive(t *testing.T, path string) {
	t.Helper()
	conn, err := rawDB(t, path).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.ExecContext(context.Background(), "ROLLBACK") })
}

// notHung runs f and fails the test if it has not returned long after the
// busy timeout: a lock must give an error, not a hang.
func notHung(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting for the lock after 30 s")
		return nil
	}
}

func checkLocked(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s1, path := openTemp(t)
	// A second Store on the same file stands in for a second process.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	run := sampleRun()
	run.Trials = nil
	if err := s1.BeginRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	other := sampleRun()
	other.Trials = nil
	if err := s2.BeginRun(ctx, other); err != nil {
		t.Fatal(err)
	}
	const per = 40
	var wg sync.WaitGroup
	errs := make(chan error, 4*per)
	write := func(s *Store, id string, first int) {
		defer wg.Done()
		for n := first; n <= 2*per; n += 2 {
			if err := s.AddTrial(ctx, id, sampleTrial(n)); err != nil {
				errs <- err
			}
		}
	}
	wg.Add(4)
	go write(s1, run.ID, 1)   // two goroutines on one store,
	go write(s1, run.ID, 2)   //
	go write(s2, run.ID, 1)   // and a second store on the same run (replaces
	go write(s2, other.ID, 1) // the same trials) and on its own run
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := s1.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Trials) != 2*per {
		t.Fatalf("%d trials, want %d", len(got.Trials), 2*per)
	}
	for i, tr := range got.Trials {
		if tr.N != i+1 || !reflect.DeepEqual(tr, sampleTrial(i+1)) {
			t.Fatalf("trial %d = %+v", i+1, tr)
		}
	}
	s1.Close()
	s2.Close()
	integrityOK(t, path)
}
