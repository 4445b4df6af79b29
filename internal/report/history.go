package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/termtext"
	"github.com/batchfit/batchfit/internal/units"
)

// WriteHistory writes the table 'batchfit history' prints: one row per
// run, in the order given, or "no runs yet" when there are none.
func WriteHistory(w io.Writer, runs []record.Run) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs yet")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTARTED\tSTATUS\tANSWER\tTRIALS\tGPU\tCOMMAND")
	for _, r := range runs {
		answer := "-"
		if r.Status == record.Found {
			answer = fmt.Sprint(r.Answer)
		}
		gpuName := "-"
		if r.GPU != nil && len(r.GPU.Devices) > 0 {
			gpuName = r.GPU.Devices[0].Name
			if r.Settings.MemoryLimit > 0 {
				gpuName += " @" + units.Bytes(r.Settings.MemoryLimit)
			}
		}
		status := string(r.Status)
		if r.Cached {
			status += " (cached)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Started.Local().Format("2006-01-02 15:04"), status, answer, len(r.Trials), gpuName, termtext.Line(strings.Join(r.Command, " "), 60))
	}
	return tw.Flush()
}
