package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/cards"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/units"
)

// Shell completion (batchfit completion SHELL) offers, besides commands and
// flags, the values the flags take: the cards --memory-limit knows, the
// frameworks, strategies and the other fixed choices, and the run ids of
// the history for show.

// completionRuns is how many of the newest runs show offers.
const completionRuns = 50

// choices completes a flag from fixed values, "value\tdescription" each.
func choices(values ...cobra.Completion) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return matching(values, typed), cobra.ShellCompDirectiveNoFileComp
	}
}

// matching are the completions that begin with what was typed: every shell
// filters them too, but not all the same way.
func matching(values []cobra.Completion, typed string) []cobra.Completion {
	var out []cobra.Completion
	for _, v := range values {
		if strings.HasPrefix(v, typed) {
			out = append(out, v)
		}
	}
	return out
}

// cardChoices are --memory-limit's names, each with its memory, and its
// aliases.
func cardChoices(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, c := range cards.Known {
		desc := fmt.Sprintf("%s, %s", c.Model, units.Bytes(c.Bytes()))
		out = append(out, cobra.CompletionWithDesc(c.Name, desc))
		for _, a := range c.Aliases {
			out = append(out, cobra.CompletionWithDesc(a, desc))
		}
	}
	return matching(out, strings.ToLower(typed)), cobra.ShellCompDirectiveNoFileComp
}

// registerCompletions gives cmd's flags that take one of a known set of
// values their completions; flags cmd lacks are skipped.
func registerCompletions(cmd *cobra.Command) {
	funcs := map[string]cobra.CompletionFunc{
		"memory-limit": cardChoices,
		"framework": choices(
			cobra.CompletionWithDesc(adapter.FrameworkAuto, "every framework's figures for Python commands"),
			adapter.FrameworkTorch, adapter.FrameworkJAX, adapter.FrameworkTensorFlow,
			cobra.CompletionWithDesc(adapter.FrameworkNone, "no adapter: NVML's figures only")),
		"strategy": choices(
			cobra.CompletionWithDesc("model", "memory-model guided (the default)"),
			cobra.CompletionWithDesc("bisect", "plain bisection")),
		"worst-case":         choices("on", "off"),
		"memory-limit-scope": choices(string(limit.ScopeProcess), string(limit.ScopeAllocator)),
		"executor":           choices("local", "slurm"),
	}
	for name, f := range funcs {
		if cmd.Flags().Lookup(name) != nil {
			if err := cmd.RegisterFlagCompletionFunc(name, f); err != nil {
				panic("flag completion: " + err.Error()) // registered twice: found by every test
			}
		}
	}
}

// runIDs completes show's RUN from the history that --db names: the newest
// runs' ids, each with its command and answer, and "latest". The file is
// opened read-only and nothing is stopped or written: completion runs at
// each press of Tab.
func (d *dbOptions) runIDs(cmd *cobra.Command, args []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := matching([]cobra.Completion{cobra.CompletionWithDesc("latest", "the newest run")}, typed)
	path, err := d.filePath()
	if err != nil {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	s, err := store.OpenReadOnly(cmd.Context(), path)
	if err != nil {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	defer s.Close()
	runs, err := s.List(cmd.Context(), completionRuns)
	if err != nil {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	for _, r := range runs {
		if !strings.HasPrefix(r.ID, typed) {
			continue
		}
		answer := string(r.Status)
		if r.Answer > 0 {
			answer = fmt.Sprint(r.Answer)
		}
		command := strings.Join(r.Command, " ")
		if len(command) > 40 {
			command = command[:39] + "…"
		}
		out = append(out, cobra.CompletionWithDesc(r.ID, fmt.Sprintf("%s: %s (%s)", answer, command, r.Started.Local().Format("2006-01-02 15:04"))))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
