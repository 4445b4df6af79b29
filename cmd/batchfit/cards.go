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
		Long: `List the GPUs that --memory-limit accepts by name: the memory each one's
driver reports (nvidia-smi's memory.total, NVML's total; R510 and later
drivers, ECC as the card ships), and the memory a CUDA process there sees
(CUDA's total: NVML's less the driver's reservation). With --memory-limit
NAME the whole trial process, CUDA context included, is held to what CUDA
sees, as on the real card; where that is not known, to NVML's total.
What the emulation cannot reproduce: another architecture's kernels and
library workspaces (cuDNN, cuBLAS), which may use a little more or less.`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			w := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tGPU\tMEMORY\tMIB\tCUDA MIB\tALSO")
			for _, c := range cards.Known {
				cuda := "-"
				if c.CUDAMiB > 0 {
					cuda = fmt.Sprint(c.CUDAMiB)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", c.Name, c.Model, units.Bytes(c.Bytes()), c.MiB, cuda, strings.Join(c.Aliases, ", "))
				if sources {
					note := c.Source
					if c.Note != "" {
						note += " (" + c.Note + ")"
					}
					fmt.Fprintf(w, "\t  %s\t\t\t\t\n", note)
					if c.CUDASource != "" {
						fmt.Fprintf(w, "\t  CUDA: %s\t\t\t\t\n", c.CUDASource)
					}
				}
			}
			return w.Flush()
		}),
	}
	cmd.Flags().BoolVar(&sources, "sources", false, "also show where each figure comes from")
	return cmd
}
