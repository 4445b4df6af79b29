package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/batchfit/batchfit/internal/cards"
	"github.com/batchfit/batchfit/internal/units"
)

func newCardsCommand(io *streams) *cobra.Command {
	var sources bool
	cmd := &cobra.Command{
		Use:   "cards",
		Short: "List the GPUs --memory-limit knows by name, with their memory",
		Long: `List the GPUs that --memory-limit accepts by name and the memory each one's
driver reports (nvidia-smi's memory.total, NVML's total; R510 and later
drivers, ECC as the card ships). With --memory-limit NAME the whole trial
process, CUDA context included, is held to that figure, as on the real card.
What the emulation cannot reproduce: another architecture's kernels and
library workspaces (cuDNN, cuBLAS), which may use a little more or less.`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			w := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tGPU\tMEMORY\tMIB\tALSO")
			for _, c := range cards.Known {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", c.Name, c.Model, units.Bytes(c.Bytes()), c.MiB, strings.Join(c.Aliases, ", "))
				if sources {
					note := c.Source
					if c.Note != "" {
						note += " (" + c.Note + ")"
					}
					fmt.Fprintf(w, "\t  %s\t\t\t\n", note)
				}
			}
			return w.Flush()
		}),
	}
	cmd.Flags().BoolVar(&sources, "sources", false, "also show where each figure comes from")
	return cmd
}
