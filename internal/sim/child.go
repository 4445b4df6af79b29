package sim

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/trial"
)

// simTorch is the torch version a simulated trial reports.
const simTorch = "2.11.0+sim"

// trialConfig is what one simulated trial was asked to do.
type trialConfig struct {
	card       Card
	w          Workload
	batch      int
	steps      int
	trial      int // BATCHFIT_TRIAL, 1-based
	reportPath string
	rank       int
	// worstCase is BATCHFIT_WORST_CASE (on unless "0"), patience
	// BATCHFIT_SHAPE_PATIENCE: how a trial of Workload.Lengths orders and
	// ends its steps, as the adapter would.
	worstCase bool
	patience  int
}

// parseTrial reads the arguments and batchfit's environment. Errors here are
// usage errors (exit 2); what torch itself would reject (devices, allocator
// settings) is checked later and fails like torch does.
func parseTrial(args []string, getenv func(string) string) (trialConfig, error) {
	var c trialConfig
	fs := newFlagSet()
	bindCard(fs, &c.card)
	bindWorkload(fs, &c.w)
	batch := fs.String("batch-size", "", "batch size (else BATCHFIT_BATCH_SIZE)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.card.Total == 0 {
		return c, errors.New("--card-total is required")
	}
	if c.card.Name == "" {
		c.card.Name = "Simulated GPU"
	}
	if err := c.w.Validate(); err != nil {
		return c, err
	}

	var err error
	switch {
	case *batch != "":
		c.batch, err = positive("--batch-size", *batch)
	case getenv("BATCHFIT_BATCH_SIZE") != "":
		c.batch, err = positive("BATCHFIT_BATCH_SIZE", getenv("BATCHFIT_BATCH_SIZE"))
	default:
		err = errors.New("no batch size: pass --batch-size or set BATCHFIT_BATCH_SIZE")
	}
	if err != nil {
		return c, err
	}
	c.steps, c.trial = 3, 1
	// BATCHFIT_STEPS=0 (--steps 0) means the program's own end: its 3 steps.
	if v := getenv("BATCHFIT_STEPS"); v != "" && v != "0" {
		if c.steps, err = positive("BATCHFIT_STEPS", v); err != nil {
			return c, err
		}
	}
	if v := getenv("BATCHFIT_TRIAL"); v != "" {
		if c.trial, err = positive("BATCHFIT_TRIAL", v); err != nil {
			return c, err
		}
	}
	c.worstCase, c.patience = getenv(adapter.WorstCaseEnv) != "0", shapePatience
	if v := getenv("BATCHFIT_SHAPE_PATIENCE"); v != "" {
		if c.patience, err = strconv.Atoi(v); err != nil || c.patience < 0 {
			return c, fmt.Errorf("BATCHFIT_SHAPE_PATIENCE: want a number of steps, got %q", v)
		}
	}
	c.reportPath = getenv(adapter.ReportEnv)
	for _, k := range []string{"RANK", "LOCAL_RANK"} {
		if r, err := strconv.Atoi(getenv(k)); err == nil {
			c.rank = r
			break
		}
	}
	return c, nil
}

func positive(what, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: want a positive integer, got %q", what, s)
	}
	return n, nil
}

// visibleDevice is the physical device torch's cuda:0 maps to. Like the CUDA
// runtime, an empty or unknown CUDA_VISIBLE_DEVICES leaves no devices.
func visibleDevice(env string, set bool, count int) (int, bool) {
	if !set {
		return 0, true
	}
	first := strings.TrimSpace(strings.Split(env, ",")[0])
	for i := range count {
		if first == strconv.Itoa(i) || first == simUUID(i) {
			return i, true
		}
	}
	return 0, false
}

// allocFraction reads per_process_memory_fraction from the allocator config
// (comma-separated key:value pairs). PYTORCH_ALLOC_CONF, the newer name, wins
// over PYTORCH_CUDA_ALLOC_CONF as in torch. 0 means no fraction.
func allocFraction(getenv func(string) string) (float64, error) {
	conf := getenv("PYTORCH_ALLOC_CONF")
	if conf == "" {
		conf = getenv("PYTORCH_CUDA_ALLOC_CONF")
	}
	for _, kv := range strings.Split(conf, ",") {
		k, v, _ := strings.Cut(kv, ":")
		if strings.TrimSpace(k) != "per_process_memory_fraction" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0 && f <= 1) {
			return 0, fmt.Errorf("per_process_memory_fraction is invalid, set it in (0.0, 1.0]; got %q", v)
		}
		return f, nil
	}
	return 0, nil
}

// Main is the hidden child mode: one simulated training run. args are the
// arguments after "__sim-trial". It returns the process exit status: 0 ok,
// 1 for a Python exception (out of memory, host OOM, size limit, crash),
// 2 for bad arguments. KillAt ends the process with SIGKILL and HangAt never
// returns.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseTrial(args, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sim-trial: error: %v\n", err)
		return 2
	}
	c := &child{trialConfig: cfg, stdout: stdout, stderr: stderr, pid: os.Getpid(), state: stateDir(cfg.card.Dir)}
	return c.run()
}

// child is a running simulated trial and its allocator state.
type child struct {
	trialConfig
	stdout, stderr io.Writer
	pid            int
	state          stateDir // "" when the card has no state directory

	dev        int     // physical device
	fraction   float64 // 0 = none
	leak       uint64
	lost       uint64 // memory this trial lost to fragmentation (Workload.FlakyP)
	registered bool
	allocated  uint64 // this process's allocator, now (= peak: it only grows)
	reserved   uint64
	// batches are the shapes of the steps run so far, for the adapter's
	// report; nil for a workload without Lengths.
	batches *adapter.Batches
}

func (c *child) run() int {
	w := c.w
	time.Sleep(w.SlowStart)
	fmt.Fprintf(c.stdout, "[%s] initializing: batch size %d, %d steps\n", nameOr(w.Name), c.batch, c.steps)

	env, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	dev, ok := visibleDevice(env, set, c.card.devices())
	if !ok {
		return c.fail(phaseSetup, noGPUMessage, "", false, false)
	}
	c.dev = dev
	var err error
	if c.fraction, err = allocFraction(os.Getenv); err != nil {
		return c.fail(phaseSetup, "RuntimeError: "+err.Error(), "", false, false)
	}
	c.leak = satMul(uint64(c.trial-1), w.LeakPerTrial)
	c.lost = w.fragmentation(rand.Float64())
	if c.state != "" {
		if err := os.MkdirAll(string(c.state), 0o700); err != nil {
			fmt.Fprintf(c.stderr, "sim-trial: error: %v\n", err)
			return 2
		}
		defer func() {
			c.holdPeak()
			c.state.unregister(c.pid)
		}()
	}
	if !w.PastGate && !waitGate(os.Getenv(trial.GateEnv)) {
		return gateClosedExit
	}
	if code, ok := c.initCUDA(); !ok {
		return code
	}
	fmt.Fprintf(c.stdout, "[%s] using cuda:0 (%s)\n", nameOr(w.Name), c.card.Name)

	plan := w.schedule(c.batch, c.steps, c.worstCase, c.patience)
	steps, first := c.steps, 0
	var shapes []adapter.BatchShape
	if plan.lengths != nil {
		steps, first = len(plan.lengths), plan.lengths[0]
		b := plan.batches
		shapes, b.Shapes = b.Shapes, nil // each step that runs adds its own
		c.batches = &b
	}
	if code, ok := c.allocate(first); !ok {
		return code
	}
	if code, ok := c.injectFault(); !ok {
		return code
	}

	step := w.StepSeconds(c.batch)
	times := make([]float64, steps)
	var peaks []uint64
	for i := range steps {
		if plan.lengths != nil {
			if code, ok := c.grow(plan.lengths[i]); !ok {
				return code
			}
			c.batches.Shapes = append(c.batches.Shapes, shapes[i])
			peaks = append(peaks, c.allocated)
		}
		time.Sleep(w.StepSleep)
		times[i] = step
		loss := 4.2 - 0.05*float64(i) - 0.01*float64(c.batch%7)
		fmt.Fprintf(c.stdout, "step %d/%d loss %.3f (%.3f s, %.0f samples/s)\n", i+1, steps, loss, step, float64(c.batch)/step)
	}
	c.reportExit(adapter.Event{Steps: steps, StepTimes: times, StepPeaks: peaks}, true)
	c.leaveLeak()
	return 0
}

// grow takes what a step at length needs beyond what the allocator holds:
// a longer batch than any before takes more activations; a shorter one
// reuses the blocks it has.
func (c *child) grow(length int) (int, bool) {
	w := c.w
	p := w.activations(c.batch, length)
	if satAdd(w.Fixed, p) <= c.allocated {
		return 0, true
	}
	return c.alloc(phaseForward, satAdd(w.Fixed, p), satAdd(w.Fixed, roundUp(p, w.Round)))
}

// allocate takes the trial's memory as a training step would: weights,
// gradients and optimizer state, then the activations layer by layer, of
// a batch at length (see Workload.activations; 0 for the whole part); ok
// is false, with the exit status, when it ran out.
func (c *child) allocate(length int) (int, bool) {
	w := c.w
	// Weights, gradients, optimizer state: no rounding, they are many
	// tensors packed into the allocator's blocks.
	for _, f := range []uint64{w.Fixed / 4, w.Fixed / 2, w.Fixed} {
		if code, ok := c.alloc(phaseSetup, f, f); !ok {
			return code, false
		}
	}
	if w.HostOOMAt > 0 && c.batch >= w.HostOOMAt {
		return c.fail(phaseData, hostOOMMessage(satMul(uint64(c.batch), 2*3*224*224)), "", false, true), false
	}
	// Activations, layer by layer; each step rounds the batch part as the
	// allocator does its blocks.
	const layers = 16
	part := w.activations(c.batch, length)
	for k := uint64(1); k <= layers; k++ {
		p := part / layers * k
		if k == layers {
			p = part
		}
		if code, ok := c.alloc(phaseForward, satAdd(w.Fixed, p), satAdd(w.Fixed, roundUp(p, w.Round))); !ok {
			return code, false
		}
	}
	return 0, true
}

// injectFault fails the trial as the workload's fault knobs say for its
// batch size (a size limit, a crash, a SIGKILL, a hang); ok is true when
// none applies.
func (c *child) injectFault() (int, bool) {
	w := c.w
	switch {
	case w.SizeLimitAt > 0 && c.batch >= w.SizeLimitAt:
		return c.fail(phaseForward, sizeLimitMessage, cudaErrorNote, false, true), false
	case w.CrashAt > 0 && c.batch >= w.CrashAt:
		return c.fail(phaseHead, shapeMessage(c.batch), "", false, true), false
	case w.KillAt > 0 && c.batch >= w.KillAt:
		syscall.Kill(c.pid, syscall.SIGKILL)
		select {} // never reached: SIGKILL cannot be caught
	case w.HangAt > 0 && c.batch >= w.HangAt:
		for { // a stuck collective or dataloader: holds its memory until killed
			time.Sleep(time.Hour)
		}
	}
	return 0, true
}

func nameOr(name string) string {
	if name == "" {
		return "train"
	}
	return name
}

// gateClosedExit is the exit status of a trial whose gate closed unopened,
// as the adapter's (not 0, which would read as a trial that ran).
const gateClosedExit = 75

// waitGate waits at a trial's gate before CUDA starts, as the adapter does
// (trial.Gate): gate is trial.GateEnv's FD:INODE, "" when the trial has
// none. It says whether the trial goes on: the gate's pipe ending unopened
// ends it.
func waitGate(gate string) bool {
	fd, _, _ := strings.Cut(gate, ":")
	n, err := strconv.Atoi(fd)
	if err != nil {
		return true
	}
	pipe := os.NewFile(uintptr(n), "gate")
	defer pipe.Close()
	var b [1]byte
	got, _ := pipe.Read(b[:])
	return got == 1
}

// initCUDA creates the CUDA context: it fails with CUDA's own out-of-memory
// error when the device cannot hold even that.
func (c *child) initCUDA() (int, bool) {
	fits := satAdd(c.w.Context, c.leak) <= c.card.Total
	if c.state != "" {
		var err error
		if fits, err = c.registerContext(); err != nil {
			fmt.Fprintf(c.stderr, "sim-trial: error: %v\n", err)
			return 2, false
		}
	}
	if !fits {
		return c.fail(phaseSetup, initOOMMessage, cudaErrorNote, false, false), false
	}
	return 0, true
}

func (c *child) registerContext() (fits bool, err error) {
	unlock, err := c.state.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	// What this trial finds on the device, for the backend to show.
	if err := c.state.raiseLeak(c.dev, c.leak); err != nil {
		return false, err
	}
	others, err := c.others()
	if err != nil {
		return false, err
	}
	if satAdd(satAdd(c.w.Context, c.leak), sum(others)) > c.card.Total {
		return false, nil
	}
	if err := c.state.register(c.pid, c.dev, c.w.Context); err != nil {
		return false, err
	}
	c.registered = true
	return true, nil
}

// alloc grows this process's allocator to allocated/reserved bytes, or fails
// with torch's out-of-memory error when reserved would pass the cap.
func (c *child) alloc(p phase, allocated, reserved uint64) (int, bool) {
	oom, err := c.tryAlloc(allocated, reserved)
	if err != nil {
		fmt.Fprintf(c.stderr, "sim-trial: error: %v\n", err)
		return 2, false
	}
	if oom != nil {
		return c.fail(p, oomMessage(*oom), "", true, true), false
	}
	return 0, true
}

// tryAlloc makes the allocation atomically with respect to the other
// processes on the card; it returns the allocator's view when it fails.
func (c *child) tryAlloc(allocated, reserved uint64) (*oomInfo, error) {
	var others map[int]uint64
	if c.state != "" {
		unlock, err := c.state.lock()
		if err != nil {
			return nil, err
		}
		defer unlock()
		if others, err = c.others(); err != nil {
			return nil, err
		}
	}
	capBytes := c.w.capFor(c.card.Total, c.fraction, c.leak, sum(others))
	if reserved > capBytes-min(capBytes, c.lost) {
		info := &oomInfo{
			tried:     roundUp(max(reserved-c.reserved, allocated-c.allocated), 512),
			total:     c.card.Total,
			process:   satAdd(c.w.Context, c.reserved),
			others:    others,
			allocated: c.allocated,
			// Memory lost to fragmentation is held but unusable: it
			// shows as reserved, as in torch's own message.
			reserved: satAdd(c.reserved, c.lost),
		}
		if used := satAdd(satAdd(info.process, c.leak), sum(others)); used < c.card.Total {
			info.free = c.card.Total - used
		}
		if c.fraction > 0 {
			info.allowed = fractionBytes(c.fraction, c.card.Total)
		}
		return info, nil
	}
	if c.state != "" {
		if err := c.state.register(c.pid, c.dev, satAdd(c.w.Context, reserved)); err != nil {
			return nil, err
		}
	}
	c.allocated, c.reserved = allocated, reserved
	return nil, nil
}

// others is the memory other live processes hold on this device.
func (c *child) others() (map[int]uint64, error) {
	u, err := c.state.usage(c.dev)
	if err != nil {
		return nil, err
	}
	delete(u, c.pid)
	return u, nil
}

func sum(m map[int]uint64) uint64 {
	var s uint64
	for _, v := range m {
		s = satAdd(s, v)
	}
	return s
}

// fail ends the run as an uncaught Python exception: the traceback and the
// exception line (plus any note torch prints after it) on stderr, the
// adapter's exit event, exit status 1.
func (c *child) fail(p phase, exception, note string, oom, cudaInit bool) int {
	fmt.Fprint(c.stderr, c.w.traceback(p)+exception+"\n"+note)
	c.reportExit(adapter.Event{OOM: oom, Exception: exception}, cudaInit)
	c.leaveLeak()
	return 1
}

// reportExit appends the adapter's exit event, as the real adapter does at
// interpreter exit. A report that cannot be written is a warning: the trial's
// exit status and output still tell batchfit what happened.
func (c *child) reportExit(ev adapter.Event, cudaInit bool) {
	if c.reportPath == "" {
		return
	}
	ev.Event = "exit"
	ev.PID = c.pid
	ev.Rank = c.rank
	ev.Torch = simTorch
	ev.Batches = c.batches
	if cudaInit {
		ev.CUDAInitialized = true
		ev.Device = c.card.Name
		ev.DeviceTotal = c.card.Total
		ev.MaxAllocated = c.allocated
		ev.MaxReserved = c.reserved
	}
	if err := adapter.Append(c.reportPath, ev); err != nil {
		fmt.Fprintf(c.stderr, "batchfit adapter: warning: %v\n", err)
	}
}

// holdPeak keeps this process's memory on the card, as it exits, until the
// Backend has listed it at that figure, when the card asks for it. The
// figure only grows, so it is the peak.
func (c *child) holdPeak() {
	if !c.card.HoldPeak || !c.registered {
		return
	}
	if err := c.state.hold(c.pid, satAdd(c.w.Context, c.reserved)); err != nil {
		fmt.Fprintf(c.stderr, "sim-trial: warning: %v\n", err)
		return
	}
	for c.state.held(c.pid) {
		time.Sleep(time.Millisecond)
	}
}

// leaveLeak records, at exit, the memory this trial leaves on the device for
// the next one: trial n leaves n*LeakPerTrial in all.
func (c *child) leaveLeak() {
	if c.state == "" || c.w.LeakPerTrial == 0 || !c.registered {
		return
	}
	unlock, err := c.state.lock()
	if err != nil {
		return
	}
	defer unlock()
	c.state.raiseLeak(c.dev, satMul(uint64(c.trial), c.w.LeakPerTrial))
}
