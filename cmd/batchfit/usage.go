package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// strictCommandLine makes every command line cobra would answer with help
// on stdout and exit 0 a usage error instead, but for bare "batchfit",
// which prints its help: a command that only groups others (cache,
// completion) given none, any of them given an unknown one (with the nearest
// names: commandArgs), and help for an unknown topic. stdout carries
// results, and a script must see exit 2 for a command line that did nothing.
func strictCommandLine(root *cobra.Command) {
	root.SetHelpCommand(newHelpCommand())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var visit func(*cobra.Command)
	visit = func(cmd *cobra.Command) {
		if !cmd.Runnable() && cmd.HasSubCommands() {
			cmd.RunE = needsSubcommand
			cmd.Args = commandArgs
		}
		for _, sub := range cmd.Commands() {
			visit(sub)
		}
	}
	visit(root)
	// Every command inherits the root's templates.
	root.SetHelpTemplate(helpTemplate)
	useFlagGroups(root)
	// What a newcomer types first.
	root.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
	root.Args = commandArgs
}

// needsSubcommand is the body of a command that only groups others. An
// unknown one never gets here: cobra refuses it first.
func needsSubcommand(cmd *cobra.Command, args []string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() && sub.Name() != "help" {
			names = append(names, sub.Name())
		}
	}
	return usageError(fmt.Sprintf("choose one of: %s; run '%s --help' for usage", strings.Join(names, ", "), cmd.CommandPath()),
		"%s needs a command", cmd.CommandPath())
}

// newHelpCommand is cobra's help command, except that an unknown topic is
// a usage error rather than the root's help on stdout.
func newHelpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help provides help for any command in the application.",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usageError("run 'batchfit --help' for the commands", "no help topic %q", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	}
}

// noArgs refuses arguments to a command that takes none, saying so: cobra's
// NoArgs calls them unknown commands, which reads as a typo in the command.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasAvailableSubCommands() && len(suggest(args[0], subcommandNames(cmd))) > 0 {
		return commandArgs(cmd, args) // history cleer
	}
	return usageError(fmt.Sprintf("run '%s --help' for usage", cmd.CommandPath()),
		"%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))
}
