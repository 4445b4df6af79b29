// Command strategies compares the search strategies on the simulator: for
// many random workload shapes it runs each strategy at several trials per
// round and prints, per strategy, the mean and worst number of trials and
// rounds, and whether every answer equalled the simulator's ground truth.
//
//	go run ./bench/strategies [-shapes 100] [-seed 1] [-k 1,2,4] [-limit 0.3]
//
// Trials are played in-process from the simulator's memory law (the same law
// its child processes apply), so the benchmark measures trial counts, which
// are what cost time on a real GPU, not process start-up.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/sim"
)

func main() {
	shapes := flag.Int("shapes", 100, "random workload shapes")
	seed := flag.Int64("seed", 1, "random seed")
	ks := flag.String("k", "1,2,4", "trials per round (GPUs) to compare")
	limit := flag.Float64("limit", 0, "memory limit as a share of the card (0: the whole card)")
	flag.Parse()

	var kList []int
	for _, f := range strings.Split(*ks, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			fmt.Fprintf(os.Stderr, "strategies: bad -k %q\n", *ks)
			os.Exit(2)
		}
		kList = append(kList, k)
	}
	card := sim.H100()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "strategy\tk\tshapes\texact\tmean trials\tmax trials\tmean rounds\tmax rounds\t\n")
	for _, strategy := range []search.Strategy{search.Model, search.Bisect} {
		for _, k := range kList {
			s := run(strategy, k, *shapes, *seed, card, *limit)
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%d\t%.2f\t%d\t\n", strategy, k, s.n, s.exact,
				float64(s.trials)/float64(s.n), s.maxTrials, float64(s.rounds)/float64(s.n), s.maxRounds)
		}
	}
	tw.Flush()
}

type stats struct {
	n, exact, trials, rounds, maxTrials, maxRounds int
}

func run(strategy search.Strategy, k, shapes int, seed int64, card sim.Card, limit float64) stats {
	rng := rand.New(rand.NewSource(seed))
	var s stats
	for i := 0; i < shapes; i++ {
		w := sim.RandomWorkload(rng)
		capBytes := w.Cap(card, limit)
		truth := w.TrueMax(card, limit, 1, 1<<20, 1)
		capacity := card.Total
		if limit > 0 {
			capacity = uint64(limit * float64(card.Total))
		}
		prober := search.ProberFunc(func(ctx context.Context, req search.Request) ([]search.Observation, error) {
			sizes := req.Sizes
			obs := make([]search.Observation, len(sizes))
			for j, b := range sizes {
				obs[j] = search.Observation{Size: b, Outcome: classify.OOM}
				if w.Fits(b, capBytes) {
					a, r, d := w.Peak(b)
					obs[j] = search.Observation{Size: b, Outcome: classify.OK, Memory: search.Memory{Allocated: a, Reserved: r, Device: d}}
				}
			}
			return obs, nil
		})
		cfg := search.Config{Min: 1, Max: 1 << 20, MultipleOf: 1, Parallel: k, Strategy: strategy, Capacity: capacity, AllocatorCap: limit > 0}
		res, err := search.Run(context.Background(), cfg, prober)
		s.n++
		if (err == nil && res.Max == truth) || (truth == 0 && err != nil) {
			s.exact++
		}
		s.trials += len(res.Trials)
		s.rounds += res.Rounds
		s.maxTrials = max(s.maxTrials, len(res.Trials))
		s.maxRounds = max(s.maxRounds, res.Rounds)
	}
	return s
}
