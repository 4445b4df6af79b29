package claim

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/gpu"
)

// holdEnv makes the test binary a process that claims the GPU of its
// value's directory, says so on stdout and waits to be killed.
const holdEnv = "CLAIM_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		c, err := Locks{Dir: dir}.Take([]gpu.Device{h100}, Holder{PID: os.Getpid(), Command: []string{"held"}})
		if err != nil {
			os.Exit(1)
		}
		c.Recorded("r-child")
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

var (
	h100 = gpu.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H100"}
	a100 = gpu.Device{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA A100"}
)

func TestOneHolderAtATime(t *testing.T) {
	l := Locks{Dir: filepath.Join(t.TempDir(), "gpus")}
	first, err := l.Take([]gpu.Device{h100}, Holder{PID: 11, Command: []string{"train", "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Recorded("run-a"); err != nil {
		t.Fatal(err)
	}
	// The holder is named, run and all; another GPU is free.
	_, err = l.Take([]gpu.Device{a100, h100}, Holder{PID: 12})
	var held *HeldError
	want := Holder{PID: 11, Command: []string{"train", "a"}, Run: "run-a", Recorded: true}
	if !errors.As(err, &held) || held.Device != h100 || held.Holder.PID != want.PID || held.Holder.Run != want.Run ||
		!slices.Equal(held.Holder.Command, want.Command) {
		t.Fatalf("second Take: %v (%+v), want a HeldError on %s naming %+v", err, held, h100.UUID, want)
	}
	// The refused claim let go of the GPU it had taken on the way.
	other, err := l.Take([]gpu.Device{a100}, Holder{PID: 13})
	if err != nil {
		t.Fatalf("a100 after a refused claim: %v", err)
	}
	other.Release()

	first.Release()
	again, err := l.Take([]gpu.Device{h100}, Holder{PID: 14})
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	again.Release()
	if b, err := os.ReadFile(filepath.Join(l.Dir, "GPU-aaaa.lock")); err != nil || len(b) != 0 {
		t.Errorf("a released lock file holds %q (%v), want nothing", b, err)
	}
}

// A search refused while the holder has not yet named its run waits for
// it, and takes the GPU if the holder lets go meanwhile.
func TestTakeWhenTheHolderLetsGo(t *testing.T) {
	l := Locks{Dir: t.TempDir()}
	first, err := l.Take([]gpu.Device{h100}, Holder{PID: 11})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		first.Release()
	}()
	c, err := l.Take([]gpu.Device{h100}, Holder{PID: 12})
	if err != nil {
		t.Fatalf("Take while the holder lets go: %v", err)
	}
	c.Release()
}

// The kernel drops the claim of a process that is killed.
func TestKilledHolderLetsGo(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), holdEnv+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the child did not claim the GPU: %q, %v", line, err)
	}
	_, err = Locks{Dir: dir}.Take([]gpu.Device{h100}, Holder{PID: os.Getpid()})
	var held *HeldError
	if !errors.As(err, &held) || held.Holder.PID != child.Process.Pid || held.Holder.Run != "r-child" {
		t.Fatalf("Take while the child holds it: %v (%+v)", err, held)
	}
	child.Process.Kill()
	child.Wait()
	c, err := Locks{Dir: dir}.Take([]gpu.Device{h100}, Holder{PID: os.Getpid()})
	if err != nil {
		t.Fatalf("Take after the holder was killed: %v", err)
	}
	c.Release()
}

func TestFileName(t *testing.T) {
	for _, tc := range []struct {
		d    gpu.Device
		want string
	}{
		{h100, "GPU-aaaa.lock"},
		{gpu.Device{Index: 2, Name: "Old GPU/x"}, "2-Old_GPU_x.lock"},
	} {
		if got := fileName(tc.d); got != tc.want {
			t.Errorf("fileName(%+v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestNoneHoldsNothing(t *testing.T) {
	c, err := None{}.Take([]gpu.Device{h100}, Holder{})
	if err != nil || len(c.files) != 0 {
		t.Fatalf("None.Take = %+v, %v", c, err)
	}
	c.Release()
}
