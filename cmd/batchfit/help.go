package main

import (
	"os"
	"strconv"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// Flag groups, in the order --help shows them.
const (
	groupCore   = "Search"
	groupMemory = "Memory"
	groupOutput = "Output and history"
	groupGPUs   = "Several GPUs"
	groupSlurm  = "Slurm"
	groupSim    = "Simulator"
)

var groupOrder = []string{groupCore, groupMemory, groupOutput, groupGPUs, groupSlurm, groupSim}

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
	cobra.AddTemplateFunc("wrapHelp", func(cmd *cobra.Command, s string) string { return wrapLines(s, helpColumns(cmd)) })
}

// helpTemplate is cobra's, with the description's lines wrapped to the
// help's width (cobra's own commands' texts run past 80 columns).
const helpTemplate = `{{with (or .Long .Short)}}{{wrapHelp $ . | trimTrailingWhitespaces}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}`

// wrapLines breaks each line of s longer than width at its last space that
// fits, the rest indented as the line was; shorter lines stay as they are.
func wrapLines(s string, width int) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		for len(line) > width {
			cut := strings.LastIndex(line[:width+1], " ")
			if cut <= len(indent) {
				break // one word past the width: left whole
			}
			out = append(out, strings.TrimRight(line[:cut], " "))
			line = indent + strings.TrimLeft(line[cut:], " ")
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// useFlagGroups makes cmd's --help list its flags by group, wrapped to the
// width of the terminal.
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
// the flags without a group; "Flags:" alone for a command without groups.
func groupedFlags(cmd *cobra.Command) string {
	sets := map[string]*pflag.FlagSet{}
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		g := other
		if names := f.Annotations[groupAnnotation]; len(names) > 0 {
			if sets[names[0]] == nil {
				sets[names[0]] = pflag.NewFlagSet(names[0], pflag.ContinueOnError)
			}
			g = sets[names[0]]
		}
		g.AddFlag(f)
	})
	width := helpColumns(cmd)
	var b strings.Builder
	for _, name := range groupOrder {
		if fs := sets[name]; fs != nil {
			b.WriteString("\n\n" + name + " flags:\n" + strings.TrimRight(fs.FlagUsagesWrapped(width), " \n"))
		}
	}
	if other.HasFlags() {
		heading := "Other flags"
		if len(sets) == 0 {
			heading = "Flags"
		}
		b.WriteString("\n\n" + heading + ":\n" + strings.TrimRight(other.FlagUsagesWrapped(width), " \n"))
	}
	return b.String()
}

// widthAnnotation holds, on the root command, the width its help wraps to:
// the templates cannot ask stdout, since cobra renders the usage into a
// buffer.
const widthAnnotation = "batchfit_help_width"

// setHelpWidth makes root's help wrap to the width of w (helpWidth).
func setHelpWidth(root *cobra.Command, w any) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[widthAnnotation] = strconv.Itoa(helpWidth(w))
}

// helpColumns is the width cmd's help wraps to.
func helpColumns(cmd *cobra.Command) int {
	if n, err := strconv.Atoi(cmd.Root().Annotations[widthAnnotation]); err == nil {
		return n
	}
	return helpWidth(nil)
}

// helpWidth is the width --help wraps to: the terminal's, 80 columns
// where w is no terminal (a pipe, a file) or its width is unknown.
func helpWidth(w any) int {
	const fallback = 80
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return fallback
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col < 40 {
		return fallback
	}
	return int(ws.Col) - 1 // a line of the full width leaves the cursor past it
}

// isTerminal reports whether w is a terminal that shows a live display.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb"
}
