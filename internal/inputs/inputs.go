// Package inputs finds what a run's answer depends on beyond its command
// line and settings (the files named in its arguments, the program PATH
// finds for it, the git state of its directory, the memory-relevant
// environment, the files the program loaded and opened) and hashes files
// within a budget, so that a cached answer is used only while all of them
// are unchanged.
package inputs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/trial"
)

// HashBudget is how many bytes one collection or check reads to hash files.
// A file beyond it (a dataset named in the arguments, say) is identified by
// its size and mtime instead, so a huge file costs no time but an edit that
// restores both goes unseen for it.
const HashBudget = 256 << 20

// memoryEnv are the prefixes of environment variables that change how much
// memory a program uses.
var memoryEnv = []string{"PYTORCH_", "CUDA_", "XLA_", "TF_", "NCCL_", "OMP_"}

// shapeEnv are the adapter's variables that batchfit leaves to the user:
// how long the scan for a loader's largest batches may take, and how long
// a trial whose batch shapes vary, and whose loader cannot run its largest
// batches first, runs on while its largest shape grows. They change which
// batches a trial meets, so they count though they are BATCHFIT_*.
var shapeEnv = []string{"BATCHFIT_SCAN_SECONDS", "BATCHFIT_SHAPE_PATIENCE", "BATCHFIT_SHAPE_SECONDS"}

// trialEnv are variables batchfit sets for each trial itself (probe.Prober),
// from settings the fingerprint already holds.
var trialEnv = []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}

// Git reads the state of the repository a directory is in.
type Git interface {
	// State is nil when dir is in no repository or git is missing.
	State(ctx context.Context, dir string) *record.Git
}

// Options are what Collect looks at.
type Options struct {
	Command []string // the command as recorded, {} kept
	// Program is the first argument of the command as it runs, which the
	// recorded one may not show (the demo's is "batchfit").
	Program string
	Dir     string   // its working directory
	Env     []string // its environment
	// CacheEnv names more variables that count (--history-env).
	CacheEnv []string
	Git      Git
}

// Collect returns the inputs known before the first trial.
func Collect(ctx context.Context, o Options) *record.Inputs {
	h := NewHasher()
	in := &record.Inputs{
		Files:      ArgFiles(o.Command, o.Dir, h),
		Executable: Executable(o.Program, o.Dir, o.Env, h),
		Env:        MemoryEnv(o.Env, o.CacheEnv),
	}
	if o.Git != nil {
		in.Git = o.Git.State(ctx, o.Dir)
	}
	return in
}

// ArgFiles returns the arguments that name an existing regular file, taken
// relative to dir, and the path part of --opt=path, with their hashes.
func ArgFiles(argv []string, dir string, h *Hasher) []record.File {
	var files []record.File
	for _, a := range argv {
		cands := []string{a}
		if strings.HasPrefix(a, "-") {
			_, v, ok := strings.Cut(a, "=")
			if !ok {
				continue
			}
			cands = []string{v}
		}
		for _, c := range cands {
			if c == "" {
				continue
			}
			p := c
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				continue
			}
			files = append(files, record.File{Path: c, Hash: h.Hash(p)})
		}
	}
	return files
}

// Executable returns the file that runs for argv0, found as execvp finds it
// for the trial (trial.LookPath: a bare name in the PATH of env, not
// batchfit's), with its hash; nil when there is none. A name with a slash
// is kept as given, relative to dir.
//
// A program named by a path is also among the argument files; one found
// through PATH is only here, and the path it was found at counts as well
// as its contents, since another one earlier on PATH is another program.
func Executable(argv0, dir string, env []string, h *Hasher) *record.File {
	if argv0 == "" {
		return nil
	}
	path, err := trial.LookPath(argv0, dir, env)
	if err != nil {
		return nil
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return &record.File{Path: path, Hash: h.Hash(p)}
}

// MemoryEnv returns the memory-relevant NAME=VALUE of env, sorted: the
// prefixes above, shapeEnv and the names in extra, less batchfit's own
// (BATCHFIT_*) and those it sets for each trial.
func MemoryEnv(env, extra []string) []string {
	var out []string
	seen := map[string]bool{}
	for i := len(env) - 1; i >= 0; i-- { // the last of a name wins, as in exec
		name, _, _ := strings.Cut(env[i], "=")
		if seen[name] {
			continue
		}
		seen[name] = true
		if slices.Contains(shapeEnv, name) {
			out = append(out, env[i])
			continue
		}
		if strings.HasPrefix(name, "BATCHFIT_") || slices.Contains(trialEnv, name) {
			continue
		}
		if slices.Contains(extra, name) || slices.ContainsFunc(memoryEnv, func(p string) bool { return strings.HasPrefix(name, p) }) {
			out = append(out, env[i])
		}
	}
	slices.Sort(out)
	return out
}

// Reported hashes the files the adapter reported (the sources the program
// loaded, the files it opened) with h; give both lists one Hasher, as
// Changed hashes them again with one. A file whose size or mtime is no
// longer what the program saw was edited during the search: its hash is
// "", which never matches, so the run is never a cached answer.
func Reported(sources []adapter.Source, h *Hasher) []record.File {
	files := make([]record.File, 0, len(sources))
	for _, s := range sources {
		f := record.File{Path: s.Path}
		if st, err := os.Stat(s.Path); err == nil && st.Size() == s.Size && st.ModTime().UnixNano() == s.MTimeNS {
			f.Hash = h.Hash(s.Path)
		}
		files = append(files, f)
	}
	return files
}

// Changed returns why a stored run's loaded and opened files no longer
// stand for what would run now ("" when they all do): the first file that
// changed or vanished, each hashed again now.
func Changed(in *record.Inputs) string {
	if in == nil {
		return ""
	}
	if in.LoadedTruncated {
		return "the program loaded too many files of its own to check"
	}
	h := NewHasher()
	for _, f := range slices.Concat(in.Loaded, in.Opened) {
		if _, err := os.Stat(f.Path); err != nil {
			return f.Path + " is gone"
		}
		if f.Hash == "" || h.Hash(f.Path) != f.Hash {
			return f.Path + " changed"
		}
	}
	return ""
}

// Hasher hashes files until its budget is spent.
type Hasher struct{ left int64 }

// NewHasher returns a Hasher with HashBudget bytes to read.
func NewHasher() *Hasher { return &Hasher{left: HashBudget} }

// Hash returns "sha256:<hex>" of the file's contents, "stat:<size>:<mtime
// ns>" for a file beyond what is left of the budget, or "" when it cannot be
// read.
func (h *Hasher) Hash(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	if st.Size() > h.left {
		return fmt.Sprintf("stat:%d:%d", st.Size(), st.ModTime().UnixNano())
	}
	sum := sha256.New()
	n, err := io.Copy(sum, io.LimitReader(f, h.left))
	h.left -= n
	if err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

// ExecGit reads the state with the git command.
type ExecGit struct{}

// State runs git in dir: the commit of HEAD and a hash of `git diff HEAD`
// with the names of untracked files. It is nil outside a repository or
// without git.
func (ExecGit) State(ctx context.Context, dir string) *record.Git {
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
		return cmd.Output()
	}
	if out, err := run("rev-parse", "--is-inside-work-tree"); err != nil || !bytes.HasPrefix(out, []byte("true")) {
		return nil
	}
	g := &record.Git{}
	if out, err := run("rev-parse", "--verify", "-q", "HEAD"); err == nil {
		g.Commit = strings.TrimSpace(string(out))
	}
	sum := sha256.New()
	diff := []string{"diff", "--binary", "--no-ext-diff", "--no-color"}
	if g.Commit != "" {
		diff = append(diff, "HEAD")
	}
	out, err := run(diff...)
	if err != nil {
		return nil
	}
	sum.Write(out)
	sum.Write([]byte{0})
	out, err = run("ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return nil
	}
	sum.Write(out)
	g.Diff = hex.EncodeToString(sum.Sum(nil))
	return g
}

// NoGit knows no repository (tests, and runs that must not run git).
type NoGit struct{}

// State is nil.
func (NoGit) State(context.Context, string) *record.Git { return nil }
