// Package report shows a finished run to people: the terminal summary, the
// --json document, and the HTML report and charts. The progress while a
// search runs is package live's.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/termtext"
	"github.com/batchfit/batchfit/internal/units"
)

// WriteJSONValue writes any value as indented JSON, the one JSON style of
// batchfit's output.
func WriteJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteSummary writes the human summary of a finished run: the answer, what
// proves it, the trials and the time.
func WriteSummary(w io.Writer, run *record.Run) error {
	if err := WriteSummaryHead(w, run); err != nil {
		return err
	}
	if len(run.Trials) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return WriteTrialTable(w, run)
}

// WriteSummaryHead writes the summary without its trial table: for a
// terminal where the live display's last frame still shows the trials.
func WriteSummaryHead(w io.Writer, run *record.Run) error {
	var b strings.Builder
	writeOutcome(&b, run)
	if run.Status == record.Found {
		fmt.Fprintf(&b, "  %s\n", MarginText(run.ShownMargin()))
	}
	if tp := run.Throughput; tp != nil {
		b.WriteString(ThroughputText(run.Answer, tp))
	}
	if g := run.GlobalBatch; g != nil {
		fmt.Fprintf(&b, "  %s\n", g)
	}
	for _, p := range run.NonMonotonic {
		fmt.Fprintf(&b, "  non-monotonic: %d failed below %d, which ran, both twice; a size below the answer may fail\n", p.Fail, p.OK)
	}
	forked := 0
	for _, t := range run.Trials {
		if t.Forked {
			forked++
		}
	}
	fmt.Fprintf(&b, "  rounds: %s, %s\n", RoundsText(run), units.Duration(run.Seconds))
	fmt.Fprintf(&b, "  trials: %s", TrialsText(run))
	if forked > 0 {
		fmt.Fprintf(&b, " (%d forked from a preloaded server)", forked)
	}
	b.WriteString("\n")
	if run.GPU != nil && len(run.GPU.Devices) > 0 {
		d := run.GPU.Devices[0]
		sim := ""
		if run.Simulated && !strings.Contains(d.Name, "simulated") {
			sim = " (simulated)"
		}
		fmt.Fprintf(&b, "  gpu: %s%s, %s", d.Name, sim, units.Bytes(d.Total))
		if run.Settings.MemoryLimit > 0 {
			fmt.Fprintf(&b, ", --memory-limit %s", LimitText(run.Settings))
		}
		b.WriteString("\n")
	}
	if run.Model != nil {
		fmt.Fprintf(&b, "  memory model (%s): %s + %s per sample", run.Model.Figure, units.Bytes(uint64(max(run.Model.Intercept, 0))), units.Bytes(uint64(max(run.Model.Slope, 0))))
		if o := run.Model.Outside; o > 0 {
			fmt.Fprintf(&b, ", with %s outside it", units.Bytes(uint64(o)))
		}
		b.WriteString("\n")
	}
	if line := PoolText(run); line != "" {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	if note := run.InputShapes.Note(); note != "" {
		fmt.Fprintf(&b, "  %s\n", termtext.Line(note, termtext.Width))
	}
	for _, sk := range run.Soaks {
		fmt.Fprintf(&b, "  soak: %s\n", sk.SoakText())
		if c := SoakCurve(sk.StepPeaks); c != "" {
			fmt.Fprintf(&b, "    peak by step: %s\n", c)
		}
	}
	for _, msg := range run.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", termtext.Line(msg, termtext.Width))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTrialTable writes one row per trial.
func WriteTrialTable(w io.Writer, run *record.Run) error {
	// With a known capacity (the card, or --memory-limit) each peak is also
	// shown as a share of it: torch's reserved peak, which is what an
	// allocator cap holds (the CUDA context lies outside it), else NVML's.
	var capacity uint64
	capHeader := ""
	if run.GPU != nil && run.GPU.Capacity > 0 {
		capacity = run.GPU.Capacity
		capHeader = "of " + units.Bytes(capacity) + "\t"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "trial\tsize\toutcome\tseconds\tpeak alloc\tpeak gpu\t%ssamples/s\t\n", capHeader)
	for _, t := range run.Trials {
		note := ""
		switch {
		case t.Held:
			note = " (held)" // the proof's, on a held card
		case t.Retry:
			note = " (retry)"
		}
		share := ""
		if capacity > 0 {
			share = "-\t"
			peak := t.Reserved
			if peak == 0 {
				peak = t.Device
			}
			if peak > 0 && t.Outcome.Fits() {
				share = fmt.Sprintf("%.1f %%\t", 100*float64(peak)/float64(capacity))
			}
		}
		alloc, device := orDash(t.Allocated), orDash(t.Device)
		if t.Outcome.TooLarge() {
			// What it needed at least, as everywhere (record.Trial.Needed),
			// under the column of its kind of memory.
			alloc, device = t.MemoryText(allocatorOnly(run), "> ", "-"), "-"
			if t.Needed(allocatorOnly(run)).Device {
				alloc, device = device, alloc
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%s%s\t%.1f\t%s\t%s\t%s%s\t\n", t.N, t.Size, t.Outcome, note, t.Seconds,
			alloc, device, share, throughput(t))
	}
	return tw.Flush()
}

// MarginText says a margin size in words, and how it is known: "with 5 %
// of memory free: 904 (predicted by the memory model)". A size the run
// cannot know is said to be unknown, never made up.
func MarginText(m record.Margin) string {
	head := fmt.Sprintf("with %s %% of memory free", htmlNumber(m.Percent))
	switch {
	case m.Basis == record.MarginUnknown:
		return fmt.Sprintf("%s: unknown (%s)", head, m.Why)
	case m.Size == 0:
		return fmt.Sprintf("%s: none (%s)", head, m.Why)
	case m.Basis == record.MarginModel:
		return fmt.Sprintf("%s: %d (predicted by the memory model; --margin %s%% measures it)", head, m.Size, htmlNumber(m.Percent))
	}
	return fmt.Sprintf("%s: %d", head, m.Size)
}

func failureOf(run *record.Run, size int) string {
	if t := run.LastFailure(size); t != nil {
		return "failed (" + string(t.Outcome) + ")"
	}
	return "failed"
}

func orDash(b uint64) string {
	if b == 0 {
		return "-"
	}
	return units.Bytes(b)
}

func throughput(t record.Trial) string {
	if v := t.Throughput(); v > 0 {
		return fmt.Sprintf("%.0f", v)
	}
	return "-"
}

// WriteModelTable writes one row per GPU model: the answer on each card.
func WriteModelTable(w io.Writer, runs []*record.Run) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tMEMORY\tANSWER\tTRIALS\tSECONDS\tSTATUS")
	for _, r := range runs {
		name, mem := "-", "-"
		if r.GPU != nil && len(r.GPU.Devices) > 0 {
			name, mem = r.GPU.Devices[0].Name, units.Bytes(r.GPU.Capacity)
		}
		answer := "-"
		if r.Status == record.Found {
			answer = fmt.Sprint(r.Answer)
		}
		status := string(r.Status)
		if r.Cached {
			status += " (cached)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%s\n", name, mem, answer, len(r.Trials), r.Seconds, status)
	}
	return tw.Flush()
}

// SoakCurve writes a soak's per-step peaks at a few steps spread over the
// run, the first and last included: "1: 20.0 GiB, 100: 20.1 GiB, …".
func SoakCurve(peaks []uint64) string {
	n := len(peaks)
	if n == 0 {
		return ""
	}
	const points = 6
	var parts []string
	last := -1
	for i := 0; i < points; i++ {
		at := i * (n - 1) / (points - 1)
		if at == last {
			continue
		}
		last = at
		parts = append(parts, fmt.Sprintf("%d: %s", at+1, units.Bytes(peaks[at])))
	}
	return strings.Join(parts, ", ")
}

// writeOutcome writes the summary's first lines: the answer and its
// proof, or why there is none.
func writeOutcome(b *strings.Builder, run *record.Run) {
	switch run.Status {
	case record.Found:
		fmt.Fprintf(b, "largest batch size that runs: %d\n", run.Answer)
		switch {
		case run.Cached:
			fmt.Fprintf(b, "  from the history: run %s of %s (use --fresh to search again)\n", run.ID, run.Started.Local().Format("2006-01-02 15:04"))
		case len(run.Flaky) > 0 || run.AtRisk != nil:
			if len(run.Flaky) > 0 {
				fmt.Fprintf(b, "  not exact: the boundary is flaky (%s); %d is the safe side, it ran every time\n", run.FlakyText(), run.Answer)
			}
			if run.AtRisk != nil {
				fmt.Fprintf(b, "  not exact: %s; %d is the safe side, it ran every time\n", run.AtRiskText(), run.Answer)
			}
		case run.FirstFailure > 0:
			fmt.Fprintf(b, "  proof: %d ran ok, %d %s%s\n", run.Answer, run.FirstFailure, failureOf(run, run.FirstFailure), proofWhere(run))
		default:
			fmt.Fprintf(b, "  proof: %d ran ok and is the --max bound%s\n", run.Answer, proofWhere(run))
		}
	case record.NothingFits:
		fmt.Fprintf(b, "no batch size fits: even %d does not run\n", run.Smallest())
	default:
		fmt.Fprintf(b, "search %s", run.Status)
		if run.Error != "" {
			fmt.Fprintf(b, ": %s", termtext.Line(run.Error, termtext.Width))
		}
		b.WriteString("\n")
	}
}

// proofWhere says where an answer under --memory-limit was proven, as the
// end of the proof's line: on a held card, or in capped trials, which a
// real card may beat by a size or two.
func proofWhere(run *record.Run) string {
	switch run.Proof {
	case record.ProofHeld:
		return fmt.Sprintf(", on a held %s card", units.Bytes(run.Settings.MemoryLimit))
	case record.ProofCapped:
		if run.Settings.MemoryLimitScope == record.ScopeProcess {
			return " in capped trials (a real card may take a size or two less)"
		}
	}
	return ""
}

// LargerPoolShare is the share of the card that PoolText's hint offers a
// JAX program: XLA's pool at 90 % leaves a 24 GiB card 2.4 GiB for the
// CUDA context (0.6 GiB on an H200) and what XLA takes outside its pool.
const LargerPoolShare = 0.9

// PoolText describes the framework's pool on the named card and why it is
// that size ("pool: JAX's on a 24.00 GiB card, 18.00 GiB (75 %, jaxlib's
// default)"), with what a larger share would allow by the memory model
// when the pool was below LargerPoolShare; "" without a pool.
func PoolText(run *record.Run) string {
	p := run.Pool
	if p == nil {
		return ""
	}
	text := fmt.Sprintf("pool: JAX's on a %s card, %s (%.0f %%, %s)", units.Bytes(run.Settings.MemoryLimit), units.Bytes(p.Bytes), 100*p.Share, p.Source)
	m := run.Model
	if p.Share >= LargerPoolShare || m == nil || m.Figure != "allocated" || m.Slope <= 0 {
		return text
	}
	larger := LargerPoolShare * float64(run.Settings.MemoryLimit)
	if n := int((larger - m.Intercept) / m.Slope); n > run.Answer {
		text += fmt.Sprintf("; XLA_PYTHON_CLIENT_MEM_FRACTION=%g would allow about %d (the memory model)", LargerPoolShare, n)
	}
	return text
}

// LimitText describes --memory-limit as the run held it: the card it
// emulates, its size with the exact bytes, and its scope, e.g. "NVIDIA L4,
// 22.03 GiB (23654825984 bytes) for the whole process".
func LimitText(s record.Settings) string {
	text := fmt.Sprintf("%s (%d bytes)", units.Bytes(s.MemoryLimit), s.MemoryLimit)
	if s.MemoryLimitCard != "" {
		text = s.MemoryLimitCard + ", " + text
	}
	switch s.MemoryLimitScope {
	case record.ScopeProcess:
		text += " for the whole process"
	case record.ScopeAllocator:
		text += " for the allocator only"
	}
	return text
}

// RoundsText says how many rounds the run took, those that found the
// answer apart from those that only proved it: a round's trials run at
// once, so rounds are what a user waits for. On a held card every proof
// trial runs alone, a round of its own.
func RoundsText(run *record.Run) string {
	find := run.Rounds - run.ProofRounds
	switch {
	case run.ProofRounds == 0:
		return fmt.Sprint(run.Rounds)
	case run.Proof == record.ProofHeld && run.Settings.Parallel > 1:
		return fmt.Sprintf("%d to find, %d to prove on held cards (a trial a GPU at a time)", find, run.ProofRounds)
	case run.Proof == record.ProofHeld:
		return fmt.Sprintf("%d to find, %d to prove on a held card (one trial at a time)", find, run.ProofRounds)
	}
	return fmt.Sprintf("%d to find, %d to prove", find, run.ProofRounds)
}

// TrialsText counts the run's trials, and the re-checks among them.
func TrialsText(run *record.Run) string {
	if n := run.Rechecks(); n > 0 {
		return fmt.Sprintf("%d, %d of them re-checks", len(run.Trials), n)
	}
	return fmt.Sprint(len(run.Trials))
}
