package main

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/sim"
)

func newDemoCommand(io *streams) *cobra.Command {
	var o searchOptions
	o.db.stderr = io.stderr
	var so simOptions
	cmd := &cobra.Command{
		Use:   "demo [flags]",
		Short: "Run a whole search on a simulated GPU (no GPU needed)",
		Long: `Run a full batchfit search against a simulated 80 GiB GPU and a ResNet-50-like
training workload. Each trial is a real child process, exactly as in a real
search; only the GPU is simulated. Takes a few seconds.

` + outputHelp + `

` + exitCodesHelp,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			lengths, err := so.check()
			if err != nil {
				return err
			}
			for _, name := range idleInDemo {
				if cmd.Flags().Changed(name) && !o.quiet {
					fmt.Fprintf(io.stderr, "batchfit: note: --%s does nothing in the demo, whose simulated trainer is no Python program\n", name)
				}
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the batchfit executable: %w", err)
			}
			state := so.state
			if state == "" {
				if state, err = os.MkdirTemp("", "batchfit-simgpu-"); err != nil {
					return fmt.Errorf("create the simulated GPU's state folder: %w", err)
				}
				defer os.RemoveAll(state)
			}
			card := sim.H100()
			card.Dir = state
			card.Count = so.gpus
			w := sim.ResNet50()
			w.SlowStart = so.slowStart
			w.FlakyP, w.FlakyBand = so.flaky, so.flakyBand
			w.Lengths, w.Iterable = lengths, so.iterable
			t := &target{
				command:   sim.Command(exe, card, w),
				shown:     demoShown(cmd.Flags()),
				backend:   sim.NewBackend(card),
				simulated: true,
				framework: sim.Framework{},
			}
			return o.execute(cmd.Context(), io, t)
		}),
	}
	o.registerDemo(cmd.Flags())
	so.register(cmd.Flags())
	return cmd
}

// notForDemo are search's flags that mean nothing to the simulated trainer,
// which is no Python program: it has no warm worker and no fork server.
// The demo's help leaves them out; given, they still parse, so that a
// command that passed them still runs: those of idleInDemo with a note that
// they do nothing here, --worker (and --keep-after-oom, which needs it)
// with the error that says why it cannot run.
var notForDemo = append([]string{"worker", "keep-after-oom"}, idleInDemo...)

// idleInDemo are the flags of notForDemo that the demo runs with, doing
// nothing: the fork server's and its detail's.
var idleInDemo = []string{"no-preload", "preload", "verbose"}

// registerDemo registers the search flags that apply to the demo. The
// executor's flags run the demo's trials as Slurm jobs, which tests of the
// Slurm executor do on a real cluster; a newcomer's demo never does, so
// its --help leaves them out.
func (o *searchOptions) registerDemo(fs *pflag.FlagSet) {
	all := pflag.NewFlagSet("search", pflag.ContinueOnError)
	o.register(all) // sets every default, those of the flags left out too
	all.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(notForDemo, f.Name) {
			f.Hidden = true
		}
		if slices.Contains(f.Annotations[groupAnnotation], groupSlurm) {
			f.Hidden = true
		}
		fs.AddFlag(f)
	})
	o.flags = fs
}

// simOptions are the demo's flags for the simulated card and trainer.
type simOptions struct {
	gpus      int
	state     string
	slowStart time.Duration
	flaky     float64
	flakyBand int
	lengths   string
	iterable  bool
}

func (so *simOptions) register(fs *pflag.FlagSet) {
	fs.IntVar(&so.gpus, "sim-gpus", 1, "number of simulated GPUs (try with --gpus all)")
	fs.Float64Var(&so.flaky, "sim-flaky", 0, "simulate a flaky trainer: each trial within --sim-flaky-band samples of the limit runs out of memory with this probability, e.g. 0.2")
	fs.IntVar(&so.flakyBand, "sim-flaky-band", 3, "how near the limit, in samples, --sim-flaky's trials fail")
	fs.StringVar(&so.lengths, "sim-lengths", "", "simulate a language model padded to each batch's longest sequence: the loader's sequence `lengths`, one batch a step, such as 384,512,1024,640,2048,768 (its longest batch late); memory follows the step's length")
	fs.BoolVar(&so.iterable, "sim-iterable", false, "with --sim-lengths, a loader that cannot be reordered (an iterable dataset): trials cannot run the longest batch first")
	// For tests: a card whose state others can share (batchfit __sim-hold
	// puts a stranger's memory there), and trials slow to start.
	fs.StringVar(&so.state, "sim-state", "", "the simulated card's state folder")
	fs.DurationVar(&so.slowStart, "sim-slow-start", 0, "each simulated trial sleeps this long first")
	fs.MarkHidden("sim-state")
	fs.MarkHidden("sim-slow-start")
	flagGroup(fs, groupSim, "sim-gpus", "sim-flaky", "sim-flaky-band", "sim-lengths", "sim-iterable")
}

// check refuses values the simulator cannot take, and returns the
// loader's lengths, nil without --sim-lengths.
func (so *simOptions) check() (sim.Lengths, error) {
	if so.gpus < 1 {
		return nil, usageError("give --sim-gpus a number of simulated GPUs, 1 or more", "--sim-gpus must be at least 1, got %d", so.gpus)
	}
	if !(so.flaky >= 0 && so.flaky <= 1) {
		return nil, usageError("give --sim-flaky a probability, such as 0.2", "--sim-flaky %g: must be from 0 to 1", so.flaky)
	}
	if so.flakyBand < 1 {
		return nil, usageError("give --sim-flaky-band a number of samples, 1 or more", "--sim-flaky-band must be at least 1, got %d", so.flakyBand)
	}
	var lengths sim.Lengths
	if so.lengths != "" {
		if err := lengths.Set(so.lengths); err != nil {
			return nil, usageError("give --sim-lengths the sequence lengths of the loader's batches, such as 384,512,2048", "--sim-lengths %q: not a list of positive lengths", so.lengths)
		}
	}
	if so.iterable && lengths == nil {
		return nil, usageError("add --sim-lengths, whose order an iterable loader keeps", "--sim-iterable needs --sim-lengths")
	}
	return lengths, nil
}

// simTrainerFlags are the demo's flags that change what the simulated trainer
// does, and so its answer. The others are in the fingerprint already
// (--sim-gpus, through the GPU list) or change no answer: --sim-state is
// where the card's state lives, --sim-slow-start how long a trial takes,
// which reaches a cached answer only through the timeout check of its
// trials' times.
var simTrainerFlags = []string{"sim-flaky", "sim-flaky-band", "sim-lengths", "sim-iterable"}

// demoShown is the demo's command as recorded and fingerprinted: "batchfit
// demo" and each of simTrainerFlags not at its default, as --name=value,
// so that one simulated trainer's answer never stands in for another's.
func demoShown(fs *pflag.FlagSet) []string {
	shown := []string{"batchfit", "demo"}
	for _, name := range simTrainerFlags {
		if f := fs.Lookup(name); f != nil && f.Value.String() != f.DefValue {
			shown = append(shown, "--"+name+"="+f.Value.String())
		}
	}
	return shown
}

// newSimTrialCommand is the hidden child mode that plays one simulated trial.
func newSimTrialCommand(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:                sim.ChildCommand,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := sim.Main(args, io.stdout, io.stderr); code != 0 {
				return &exitErr{code: code, err: errSilent}
			}
			return nil
		},
	}
}

// newSimHoldCommand is the hidden mode that plays a stranger holding memory
// on a simulated card (sim.HoldMain).
func newSimHoldCommand(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:                sim.HoldCommand,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := sim.HoldMain(args, io.stderr); code != 0 {
				return &exitErr{code: code, err: errSilent}
			}
			return nil
		},
	}
}
