package sim

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/units"
)

// HoldCommand is the hidden first argument that makes the batchfit binary a
// stranger on a simulated card: a process outside any search that holds
// memory there, as another user's job holds memory on a shared GPU. The CLI
// calls HoldMain with the arguments after it.
const HoldCommand = "__sim-hold"

// HoldMain holds memory on a simulated card until SIGINT or SIGTERM, which
// end it with status 0. args:
//
//	--state-dir DIR   the card's state directory (required)
//	--device N        the device (default 0)
//	--bytes SIZE      how much, e.g. 3GiB (required)
//	--ready FILE      created once the memory is held
//	--during-trial    wait until another process holds memory on the device
//	                  (a trial), hold only while it lives, then exit 0: a job
//	                  that comes and goes in the middle of one trial
func HoldMain(args []string, stderr io.Writer) int {
	fs := newFlagSet()
	dir := fs.String("state-dir", "", "")
	dev := fs.Int("device", 0, "")
	size := fs.String("bytes", "", "")
	ready := fs.String("ready", "", "")
	during := fs.Bool("during-trial", false, "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "sim-hold: error: %v\n", err)
		return 2
	}
	n, pct, err := units.ParseSize(*size)
	if *dir == "" || err != nil || pct != 0 || n == 0 {
		fmt.Fprintf(stderr, "sim-hold: error: want --state-dir DIR and --bytes SIZE (got %q, %q)\n", *dir, *size)
		return 2
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stop)
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "sim-hold: error: %v\n", err)
		return 2
	}
	state, pid := stateDir(*dir), os.Getpid()
	defer state.unregister(pid)

	trialPID := 0
	if *during {
		for trialPID == 0 {
			select {
			case <-stop:
				return 0
			case <-time.After(time.Millisecond):
			}
			procs, _ := state.usage(*dev)
			for p := range procs {
				if p != pid {
					trialPID = p
					break
				}
			}
		}
	}
	if err := state.register(pid, *dev, n); err != nil {
		fmt.Fprintf(stderr, "sim-hold: error: %v\n", err)
		return 2
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, nil, 0o600); err != nil {
			fmt.Fprintf(stderr, "sim-hold: error: %v\n", err)
			return 2
		}
	}
	for {
		select {
		case <-stop:
			return 0
		case <-time.After(time.Millisecond):
		}
		if trialPID != 0 && !alive(trialPID) {
			return 0
		}
	}
}
