package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggest returns the candidates nearest to typed, the closest first: those
// within a couple of edits (fewer for a short word, where two edits make
// another word), or that typed begins. None when nothing is near.
func suggest(typed string, candidates []string) []string {
	typed = strings.ToLower(typed)
	limit := 2
	if len(typed) <= 3 {
		limit = 1
	}
	best := limit + 1
	var near []string
	for _, c := range candidates {
		d := editDistance(typed, strings.ToLower(c))
		if d > limit && len(typed) >= 3 && strings.HasPrefix(c, typed) {
			d = limit // an abbreviation: --mem for --memory-limit
		}
		switch {
		case d < best:
			best, near = d, []string{c}
		case d == best && !slices.Contains(near, c):
			near = append(near, c)
		}
	}
	if best > limit {
		return nil
	}
	return near
}

// editDistance is the Levenshtein distance between a and b, with a swap of
// two neighbouring letters counted as one edit (--memroy-limit).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// flagSuggestion is "did you mean --x?" for an unknown flag of cmd, or ""
// when none of cmd's flags is near it. A long flag typed with one dash
// (-memory-limit), which pflag reads as shorthands, is one too.
func flagSuggestion(cmd *cobra.Command, err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return ""
	}
	typed := ne.GetSpecifiedName()
	if short := ne.GetSpecifiedShortnames(); short != "" {
		if len(short) < 2 {
			return ""
		}
		typed = short
	}
	typed, _, _ = strings.Cut(typed, "=")
	var names []string
	visit := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	near := suggest(typed, names)
	if len(near) == 0 {
		return ""
	}
	for i, n := range near {
		near[i] = "--" + n
	}
	return fmt.Sprintf("did you mean %s?", orList(near))
}

// commandArgs refuses an argument to a command that only groups others (the
// root, cache, completion): an unknown command, with the nearest of the
// command's commands.
func commandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := fmt.Sprintf("run '%s --help' for usage", cmd.CommandPath())
	if near := suggest(args[0], subcommandNames(cmd)); len(near) > 0 {
		for i, n := range near {
			near[i] = "'" + cmd.CommandPath() + " " + n + "'"
		}
		hint = fmt.Sprintf("did you mean %s?", orList(near))
	}
	return usageError(hint, "unknown command %q for %q", args[0], cmd.CommandPath())
}

// subcommandNames are the names and aliases of cmd's commands but the
// hidden ones.
func subcommandNames(cmd *cobra.Command) []string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
			names = append(names, sub.Aliases...)
		}
	}
	return names
}
