package inputs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/record"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestArgFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "train.py"), "print(1)\n")
	write(t, filepath.Join(dir, "conf.yaml"), "lr: 1\n")
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	got := ArgFiles([]string{"python3", "train.py", "--config=conf.yaml", "--bs", "{}", "data", "missing.py", "--flag"}, dir, NewHasher())
	if len(got) != 2 || got[0].Path != "train.py" || got[1].Path != "conf.yaml" {
		t.Fatalf("ArgFiles = %+v, want train.py and conf.yaml", got)
	}
	// printf 'print(1)\n' | sha256sum
	if want := "sha256:cc42155088fca5730758db72b2a5bca33112a941dfaa2d43098ec422ce4ea213"; got[0].Hash != want {
		t.Fatalf("hash %q is not sha256 of the contents", got[0].Hash)
	}
}

// TestExecutable: a bare name is the file the trial's PATH finds first, not
// batchfit's; a name with a slash is the file it names, relative to dir.
func TestExecutable(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "bin1"), filepath.Join(dir, "bin2")
	os.Mkdir(first, 0o755)
	os.Mkdir(second, 0o755)
	for _, p := range []string{filepath.Join(second, "mytrainer"), filepath.Join(dir, "local.sh")} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// printf '#!/bin/sh\n' | sha256sum
	const hash = "sha256:a8076d3d28d21e02012b20eaf7dbf75409a6277134439025f282e368e3305abf"
	env := []string{"PATH=" + first + ":" + second}
	if got := Executable("mytrainer", dir, env, NewHasher()); got == nil || got.Path != filepath.Join(second, "mytrainer") || got.Hash != hash {
		t.Fatalf("Executable(mytrainer) = %+v, want %s/mytrainer", got, second)
	}
	if got := Executable("./local.sh", dir, env, NewHasher()); got == nil || got.Path != "./local.sh" || got.Hash != hash {
		t.Fatalf("Executable(./local.sh) = %+v, want it as given", got)
	}
	t.Setenv("PATH", second)
	if got := Executable("mytrainer", dir, []string{"PATH=" + first}, NewHasher()); got != nil {
		t.Fatalf("Executable = %+v, found through batchfit's PATH, not the trial's", got)
	}
	if got := Executable("", dir, env, NewHasher()); got != nil {
		t.Fatalf("Executable(\"\") = %+v", got)
	}
}

func TestMemoryEnv(t *testing.T) {
	env := []string{"PATH=/bin", "PYTORCH_CUDA_ALLOC_CONF=a", "OMP_NUM_THREADS=2", "BATCHFIT_STEPS=3",
		"CUDA_VISIBLE_DEVICES=1", "MYVAR=x", "HOME=/h", "XLA_FLAGS=f", "PYTORCH_CUDA_ALLOC_CONF=b",
		"BATCHFIT_WORST_CASE=0", "BATCHFIT_SHAPE_PATIENCE=5", "BATCHFIT_SCAN_SECONDS=60"}
	want := []string{"BATCHFIT_SCAN_SECONDS=60", "BATCHFIT_SHAPE_PATIENCE=5", "MYVAR=x", "OMP_NUM_THREADS=2", "PYTORCH_CUDA_ALLOC_CONF=b", "XLA_FLAGS=f"}
	if got := MemoryEnv(env, []string{"MYVAR"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("MemoryEnv = %q, want %q", got, want)
	}
}

// TestChanged: an edit is seen even when it restores the size and mtime; a
// vanished file and a file beyond the budget too.
func TestChanged(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.py")
	write(t, p, "WIDTH = 100\n")
	st, _ := os.Stat(p)
	rec := recordOf(Reported([]adapter.Source{{Path: p, Size: st.Size(), MTimeNS: st.ModTime().UnixNano()}}, NewHasher()))
	if why := Changed(rec); why != "" {
		t.Fatalf("unchanged file: Changed = %q", why)
	}
	write(t, p, "WIDTH = 200\n")
	os.Chtimes(p, st.ModTime(), st.ModTime())
	if why := Changed(rec); why != p+" changed" {
		t.Fatalf("edited file with size and mtime restored: Changed = %q", why)
	}
	os.Remove(p)
	if why := Changed(rec); why != p+" is gone" {
		t.Fatalf("removed file: Changed = %q", why)
	}
	// A file edited during the search (its mtime is not what the program
	// saw) is never a match.
	write(t, p, "WIDTH = 100\n")
	stale := Reported([]adapter.Source{{Path: p, Size: 12, MTimeNS: time.Unix(1, 0).UnixNano()}}, NewHasher())
	if stale[0].Hash != "" || Changed(recordOf(stale)) == "" {
		t.Fatalf("file edited during the search: %+v", stale)
	}
	// A file the program opened is checked as a loaded one.
	conf := filepath.Join(dir, "config.json")
	write(t, conf, `{"limit": 100}`)
	st, _ = os.Stat(conf)
	opened := &record.Inputs{Opened: Reported([]adapter.Source{{Path: conf, Size: st.Size(), MTimeNS: st.ModTime().UnixNano()}}, NewHasher())}
	if why := Changed(opened); why != "" {
		t.Fatalf("unchanged opened file: Changed = %q", why)
	}
	write(t, conf, `{"limit": 60}`)
	if why := Changed(opened); why != conf+" changed" {
		t.Fatalf("edited opened file: Changed = %q", why)
	}
	h := &Hasher{left: 4}
	if got := h.Hash(p); got[:5] != "stat:" {
		t.Fatalf("over the budget: Hash = %q, want stat:", got)
	}
}

func TestExecGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if g := (ExecGit{}).State(ctx, dir); g != nil {
		t.Fatalf("outside a repository: %+v", g)
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	write(t, filepath.Join(dir, "a.py"), "1\n")
	git("add", "a.py")
	git("commit", "-qm", "a")
	clean := (ExecGit{}).State(ctx, dir)
	if clean == nil || len(clean.Commit) < 40 {
		t.Fatalf("clean = %+v", clean)
	}
	write(t, filepath.Join(dir, "a.py"), "2\n")
	edited := (ExecGit{}).State(ctx, dir)
	if edited.Commit != clean.Commit || edited.Diff == clean.Diff {
		t.Fatalf("an uncommitted edit: %+v, clean %+v", edited, clean)
	}
	write(t, filepath.Join(dir, "a.py"), "1\n")
	write(t, filepath.Join(dir, "new.py"), "")
	untracked := (ExecGit{}).State(ctx, dir)
	if untracked.Diff == clean.Diff {
		t.Fatal("an untracked file did not change the diff hash")
	}
}

func recordOf(files []record.File) *record.Inputs { return &record.Inputs{Loaded: files} }
