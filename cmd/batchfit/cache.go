package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// maxAge is --history-max-age: a Go duration, or whole days ("30d").
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

// newClearCommand is "history clear"; with replaced, the command of that
// name it replaces, which still works with a warning.
func newClearCommand(io *streams, replaced string) *cobra.Command {
	var db dbOptions
	clear := &cobra.Command{
		Use:   "clear",
		Short: "Stop answering from past runs: every later search runs its trials",
		Long: `Take every past run out of use as an answer to a later search. The runs stay
in the history (batchfit history, batchfit show) and still seed the start
point of a later search of the same command; only their answers are no
longer reused.`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if replaced != "" {
				fmt.Fprintf(io.stderr, "batchfit: warning: '%s' is deprecated: it is 'batchfit history clear'\n", replaced)
			}
			s, err := db.openFile(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			n, err := s.ClearCache(cmd.Context())
			if err != nil {
				return historyError("clear the history's answers", err)
			}
			fmt.Fprintf(io.stderr, "batchfit: %d answers of the history no longer reused; the runs stay in it\n", n)
			return nil
		}),
	}
	db.register(clear.Flags(), false)
	return clear
}

// newCacheCommand is the old name of "history clear", "cache clear", from
// before the store was called the history alone; hidden.
func newCacheCommand(io *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "cache",
		Short:  "Deprecated: batchfit history clear",
		Hidden: true,
	}
	cmd.AddCommand(newClearCommand(io, "batchfit cache clear"))
	return cmd
}
