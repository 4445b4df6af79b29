package doctor

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/batchfit/batchfit/internal/units"
	"github.com/batchfit/batchfit/internal/worker"
)

// wrapWidth is where the cause and fix lines wrap.
const wrapWidth = 100

// WriteText writes the report for a person: the worker, a table of the
// trials, then the findings.
func WriteText(out io.Writer, r *Report) error {
	w := bufio.NewWriter(out)
	h := r.Worker
	device := h.Device
	if h.Torch != "" {
		device += ", torch " + h.Torch
	}
	target := h.Target
	if target == "" {
		target = "the worker"
	}
	fmt.Fprintf(w, "batchfit doctor: %s on %s\n", target, device)
	memory := h.Verify == "cuda_allocated"
	if memory {
		fmt.Fprintf(w, "baseline after setup and %d warm-up step(s) at batch size %d: %s allocated, %s reserved\n",
			h.WarmupSteps, h.WarmupSize, units.Bytes(h.BaselineAllocated), units.Bytes(h.BaselineReserved))
	} else {
		fmt.Fprintf(w, "baseline after setup and %d warm-up step(s) at batch size %d: %s in live tensors (no CUDA: the reset is verified by a census of the tensors Python can reach)\n",
			h.WarmupSteps, h.WarmupSize, units.Bytes(h.BaselineTensorBytes))
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "%5s  %-9s  %6s  %-10s  %11s  %11s  %11s  %s\n", "trial", "phase", "batch", "outcome", "peak alloc", "retained", "unused rsvd", "note")
	for _, t := range r.Trials {
		peak, unused := "-", "-"
		if memory {
			peak = units.Bytes(t.PeakAllocated)
			unused = units.SignedBytes(int64(t.ReservedAfter) - int64(t.AllocatedAfter))
		}
		fmt.Fprintf(w, "%5d  %-9s  %6d  %-10s  %11s  %11s  %11s  %s\n",
			t.ID, phaseName(t.Phase), t.Size, t.Outcome, peak, units.SignedBytes(t.RetainedBytes), unused, note(t.Result))
	}
	if f := r.Fresh; f != nil {
		peak := "-"
		if f.Memory.Allocated > 0 {
			peak = units.Bytes(f.Memory.Allocated)
		}
		fmt.Fprintf(w, "%5s  %-9s  %6d  %-10s  %11s\n", "fresh", "process", f.Size, f.Outcome, peak)
	}
	fmt.Fprintln(w)

	for i, f := range r.Findings {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: %s\n", f.Severity, f.Summary)
		if len(f.Tensors) > 0 {
			names := make([]string, len(f.Tensors))
			for i, t := range f.Tensors {
				names[i] = tensorName(t)
			}
			writeWrapped(w, "  still alive: ", strings.Join(names, ", "))
		}
		if f.Cause != "" {
			writeWrapped(w, "  likely cause: ", f.Cause)
		}
		if f.Fix != "" {
			writeWrapped(w, "  fix: ", f.Fix)
		}
	}
	return w.Flush()
}

func phaseName(p Phase) string {
	if p == PhaseAfterOOM {
		return "after oom"
	}
	return string(p)
}

func note(r worker.Result) string {
	var notes []string
	if !r.Verified && r.Outcome != "canceled" && r.ResetError == "" && !r.WorkerGone {
		notes = append(notes, "not verified")
	}
	if r.OptimizerStateCreated {
		notes = append(notes, "optimizer state created")
	}
	if r.ResetError != "" {
		notes = append(notes, "reset failed")
	}
	if r.Outcome != "ok" && r.Reason != "" && r.Reason != "ok" {
		notes = append(notes, r.Reason)
	}
	return strings.Join(notes, "; ")
}

func tensorName(t worker.Tensor) string {
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = fmt.Sprint(d)
	}
	return fmt.Sprintf("%s[%s] on %s (%s)", t.DType, strings.Join(dims, ", "), t.Device, units.Bytes(t.Bytes))
}

// writeWrapped writes prefix (which ends in a space) and text, wrapped at
// wrapWidth with the continuation lines indented under the text.
func writeWrapped(w io.Writer, prefix, text string) {
	indent := strings.Repeat(" ", len(prefix))
	line := prefix
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > wrapWidth {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}
