package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// maxAge is --cache-max-age: a Go duration, or whole days ("30d").
type maxAge time.Duration

func (a *maxAge) String() string {
	d := time.Duration(*a)
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}

func (a *maxAge) Set(s string) error {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a number of days", s)
		}
		*a = maxAge(time.Duration(n) * 24 * time.Hour)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration such as 30d or 12h", s)
	}
	*a = maxAge(d)
	return nil
}

func (a *maxAge) Type() string { return "age" }

func newCacheCommand(io *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Manage the answers the history gives",
	}
	var db dbOptions
	clear := &cobra.Command{
		Use:   "clear",
		Short: "Stop answering from past runs: every later search runs its trials",
		Long: `Take every past run out of use as a cached answer. The runs stay in the
history (batchfit history, batchfit show) and still seed the start point of a
later search of the same command; only their answers are no longer reused.`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			s, err := db.openFile(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			n, err := s.ClearCache(cmd.Context())
			if err != nil {
				return historyError("clear the cache", err)
			}
			fmt.Fprintf(io.stderr, "batchfit: %d cached answers cleared; the runs stay in the history\n", n)
			return nil
		}),
	}
	db.register(clear.Flags(), false)
	cmd.AddCommand(clear)
	return cmd
}
