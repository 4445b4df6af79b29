package main

import (
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Flag groups, in the order --help shows them.
const (
	groupCore   = "Search"
	groupMemory = "Memory"
	groupOutput = "Output and history"
	groupGPUs   = "Several GPUs"
	groupSlurm  = "Slurm"
)

var groupOrder = []string{groupCore, groupMemory, groupOutput, groupGPUs, groupSlurm}

const groupAnnotation = "batchfit_group"

// flagGroup files the named flags under group in --help.
func flagGroup(fs *pflag.FlagSet, group string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, groupAnnotation, []string{group}); err != nil {
			panic("flag group: " + err.Error()) // a typo in a flag name here, found by every test
		}
	}
}

func init() {
	cobra.AddTemplateFunc("groupedFlags", groupedFlags)
}

// useFlagGroups makes cmd's --help list its flags by group.
func useFlagGroups(cmd *cobra.Command) {
	t := cmd.UsageTemplate()
	const flags = `{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}`
	if !strings.Contains(t, flags) {
		panic("cobra's usage template changed; update useFlagGroups")
	}
	cmd.SetUsageTemplate(strings.Replace(t, flags, `{{if .HasAvailableLocalFlags}}{{groupedFlags .}}{{end}}`, 1))
}

// groupedFlags is the flags section of --help: one heading a group, then
// the flags without a group.
func groupedFlags(cmd *cobra.Command) string {
	sets := map[string]*pflag.FlagSet{}
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		g := other
		if names := f.Annotations[groupAnnotation]; len(names) > 0 {
			if sets[names[0]] == nil {
				sets[names[0]] = pflag.NewFlagSet(names[0], pflag.ContinueOnError)
			}
			g = sets[names[0]]
		}
		g.AddFlag(f)
	})
	var b strings.Builder
	for _, name := range groupOrder {
		if fs := sets[name]; fs != nil {
			b.WriteString("\n\n" + name + " flags:\n" + strings.TrimRight(fs.FlagUsages(), " \n"))
		}
	}
	if other.HasFlags() {
		b.WriteString("\n\nOther flags:\n" + strings.TrimRight(other.FlagUsages(), " \n"))
	}
	return b.String()
}

// isTerminal reports whether w is a terminal that shows a live display.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb"
}
