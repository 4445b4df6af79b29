package sim

import (
	"flag"
	"io"
)

// ChildCommand is the hidden first argument that makes the batchfit binary act
// as a simulated trial; the CLI calls Main with the arguments after it.
const ChildCommand = "__sim-trial"

// bindWorkload defines one flag per Workload field, stored in w. It is the
// only description of the encoding: Args and Main both use it, so they
// cannot drift apart. Sizes are bytes, times Go durations.
func bindWorkload(fs *flag.FlagSet, w *Workload) {
	fs.StringVar(&w.Name, "name", "", "workload name")
	fs.Uint64Var(&w.Context, "context", 0, "CUDA context bytes per process")
	fs.Uint64Var(&w.Fixed, "fixed", 0, "fixed bytes (weights, grads, optimizer state)")
	fs.Uint64Var(&w.PerSample, "per-sample", 0, "activation bytes per sample")
	fs.Uint64Var(&w.Round, "round", 0, "allocator rounding of the batch part, bytes")
	fs.Uint64Var(&w.Noise, "noise", 0, "pseudo-noise bound, bytes")
	fs.Int64Var(&w.Seed, "seed", 0, "noise seed")
	fs.DurationVar(&w.StepOverhead, "step-overhead", 0, "simulated step overhead")
	fs.DurationVar(&w.PerSampleTime, "per-sample-time", 0, "simulated time per sample")
	fs.IntVar(&w.SaturateAt, "saturate-at", 0, "batch size that saturates the GPU")
	fs.DurationVar(&w.StepSleep, "step-sleep", 0, "real time per step")
	fs.Uint64Var(&w.LeakPerTrial, "leak-per-trial", 0, "bytes each earlier trial left on the device")
	fs.IntVar(&w.CrashAt, "crash-at", 0, "crash at batch >= N")
	fs.IntVar(&w.HangAt, "hang-at", 0, "hang at batch >= N")
	fs.IntVar(&w.HostOOMAt, "host-oom-at", 0, "host allocation failure at batch >= N")
	fs.IntVar(&w.KillAt, "kill-at", 0, "SIGKILL itself at batch >= N")
	fs.IntVar(&w.SizeLimitAt, "size-limit-at", 0, "invalid configuration argument at batch >= N")
	fs.DurationVar(&w.SlowStart, "slow-start", 0, "real sleep before initializing")
	fs.BoolVar(&w.PastGate, "past-gate", false, "start CUDA without waiting at batchfit's gate")
	fs.Float64Var(&w.FlakyP, "flaky-p", 0, "chance that a trial loses flaky-band samples of memory to fragmentation")
	fs.IntVar(&w.FlakyBand, "flaky-band", 0, "samples of memory a flaky trial loses")
	fs.Var(&w.Lengths, "lengths", "sequence lengths of the loader's batches, one a step: 384,512,2048")
	fs.BoolVar(&w.Iterable, "iterable", false, "the loader cannot be reordered (an iterable dataset)")
}

func bindCard(fs *flag.FlagSet, c *Card) {
	fs.StringVar(&c.Name, "card-name", "", "simulated GPU name")
	fs.Uint64Var(&c.Total, "card-total", 0, "bytes per device")
	fs.IntVar(&c.Count, "card-count", 0, "number of devices")
	fs.StringVar(&c.Dir, "state-dir", "", "state directory shared with the backend")
	fs.BoolVar(&c.HoldPeak, "hold-peak", false, "hold the peak until the backend has listed it")
}

// nonDefault renders the flags of fs whose value differs from the zero
// default (in flag order), to keep the trial command short.
func nonDefault(fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		switch b, ok := f.Value.(interface{ IsBoolFlag() bool }); {
		case v == f.DefValue:
		case ok && b.IsBoolFlag():
			out = append(out, "--"+f.Name+"="+v) // a boolean flag takes no separate value
		default:
			out = append(out, "--"+f.Name, v)
		}
	})
	return out
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(ChildCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// Args returns the flags that encode w for the child (fields at their zero
// value are left out).
func (w Workload) Args() []string {
	var dst Workload
	fs := newFlagSet()
	bindWorkload(fs, &dst) // defining a flag stores its zero default
	dst = w
	return nonDefault(fs)
}

func (c Card) args() []string {
	var dst Card
	fs := newFlagSet()
	bindCard(fs, &dst)
	dst = c
	return nonDefault(fs)
}

// Command is the argv of a simulated trial of w on card:
// [exe, "__sim-trial", card and workload flags..., "--batch-size", "{}"].
// batchfit replaces "{}" with the size, as for any user command.
func Command(exe string, card Card, w Workload) []string {
	argv := []string{exe, ChildCommand}
	argv = append(argv, card.args()...)
	argv = append(argv, w.Args()...)
	return append(argv, "--batch-size", "{}")
}
