package trial

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/procgroup"
)

// fullAfter is a log that takes n bytes, then refuses every write with
// ENOSPC, as a disk that fills up during a trial does; a partial write
// takes what fits.
type fullAfter struct {
	n      int
	got    bytes.Buffer
	writes int // calls after the disk filled
}

func (f *fullAfter) Write(p []byte) (int, error) {
	if room := f.n - f.got.Len(); room < len(p) {
		f.writes++
		f.got.Write(p[:max(room, 0)])
		return max(room, 0), &os.PathError{Op: "write", Path: "trial.err", Err: syscall.ENOSPC}
	}
	return f.got.Write(p)
}

func (f *fullAfter) Close() error { return nil }

// A disk that fills up during a trial loses the log's end, not the output:
// what came after the first refused write is still scanned and kept in the
// tail, the first error is the one reported, and the log is not written to
// again.
func TestStreamKeepsOutputPastAWriteError(t *testing.T) {
	t.Parallel()
	log := &fullAfter{n: 100}
	s := &stream{log: log, logPath: "/logs/trial.err", scan: classify.NewScanner(), tail: tail{n: 1000}, done: make(chan struct{})}
	o := &output{stderr: s, stdout: s}
	if err := s.connect(); err != nil {
		t.Fatal(err)
	}
	go s.copy()
	progress := strings.Repeat("epoch 0 step 0 loss 6.9082\n", 1000)
	oom := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
	// What the child writes: batchfit's write end is the child's.
	if _, err := s.w.WriteString(progress + oom); err != nil {
		t.Fatal(err)
	}
	err := o.finish()
	var le *LogError
	if !errors.As(err, &le) || le.Path != "/logs/trial.err" || le.Err != syscall.ENOSPC {
		t.Fatalf("finish: %v, want a *LogError for /logs/trial.err: ENOSPC", err)
	}
	if log.got.String() != progress[:100] || log.writes != 1 {
		t.Errorf("log got %d bytes in %d refused writes, want the first 100 in 1", log.got.Len(), log.writes)
	}
	if tail := string(s.tail.bytes()); len(tail) != 1000 || !strings.HasSuffix(tail, oom) {
		t.Errorf("tail of %d bytes ends %q", len(tail), tail[max(0, len(tail)-80):])
	}
	if got := classify.Classify(classify.Input{Matches: o.matches()}); got.Outcome != classify.OOM {
		t.Errorf("classified as %s (%s), want oom", got.Outcome, got.Reason)
	}
}

// A process outside the trial that holds a write end of its stream (it was
// handed the descriptor) cannot hold up the end of the trial: once the
// trial's processes are gone, its end is waited for only drainTimeout.
// What was written before is all there, through a pipe and through a FIFO
// alike.
func TestStreamEndIsBounded(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "pipe", true: "fifo"}[fifo], func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "trial.out")
			o, _, err := openOutput(path, path, 0, fifo)
			if err != nil {
				t.Fatal(err)
			}
			w := o.stdout.w
			if fifo {
				// A launched child opens the FIFO by its path.
				if w, err = os.OpenFile(o.stdout.fifo, os.O_WRONLY|os.O_APPEND, 0); err != nil {
					t.Fatal(err)
				}
			}
			holder, err := dupFile(w)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			if _, err := w.WriteString("training done\n"); err != nil {
				t.Fatal(err)
			}
			if fifo {
				w.Close()
			}
			start := time.Now()
			if err := o.finish(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < drainTimeout || d > drainTimeout+time.Second {
				t.Errorf("finish took %v, want about %v", d, drainTimeout)
			}
			if b, _ := os.ReadFile(path); string(b) != "training done\n" {
				t.Errorf("log %q", b)
			}
			if o.fifos != "" {
				if _, err := os.Stat(o.fifos); !os.IsNotExist(err) {
					t.Errorf("the FIFOs' folder is still there: %v", err)
				}
			}
		})
	}
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// pathLauncher starts the leader as a fork server does: a child that opens
// its output by the paths it is given, here through the shell's
// redirections.
type pathLauncher struct{}

func (pathLauncher) Launch(l Launch) (Leader, error) {
	cmd := exec.Command("/bin/sh", append([]string{"-c", `out=$1 err=$2; shift 2; exec "$@" >"$out" 2>"$err" </dev/null`, "sh", l.Stdout, l.Stderr}, l.Argv...)...)
	cmd.Env, cmd.Dir, cmd.SysProcAttr = l.Env, l.Dir, procgroup.Attr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &execLeader{cmd: cmd, exited: procgroup.WaitExit(cmd.Process.Pid)}, nil
}

var _ Launcher = pathLauncher{}

// A launched trial writes to FIFOs that batchfit copies to the logs: the
// logs are whole, and a log that cannot be written is reported as for a
// trial batchfit started itself, its OOM found all the same.
func TestLaunchedTrialOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := Spec{Argv: []string{"testdata/bigoutput.sh"}, StdoutPath: filepath.Join(dir, "out.log"),
		StderrPath: filepath.Join(dir, "err.log"), Launcher: pathLauncher{}}
	res, err := Run(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(spec.StdoutPath); bytes.Count(b, []byte("\n")) != 2000 || !bytes.HasSuffix(b, res.StdoutTail) {
		t.Errorf("stdout log has %d lines, want all 2000 ending in the tail", bytes.Count(b, []byte("\n")))
	}
	if b, _ := os.ReadFile(spec.StderrPath); string(b) != "warning: first\nwarning: second\nerror: last\n" {
		t.Errorf("stderr log %q", b)
	}

	spec = Spec{Argv: []string{"testdata/oomafter60k.sh"}, StdoutPath: filepath.Join(dir, "out.log"),
		StderrPath: "/dev/full", Launcher: pathLauncher{}}
	res, err = Run(context.Background(), spec, nil)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Run: %v, want no space left on device", err)
	}
	if got := classifyRes(res); got.Outcome != classify.OOM {
		t.Errorf("classified as %s (%s), want oom", got.Outcome, got.Reason)
	}
}
