package report

import (
	"fmt"
	"slices"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/units"
)

// htmlSoakView is the page's soak section: what --soak was, the chart of
// every soak's peak by step, and one row a soak.
type htmlSoakView struct {
	Intro string
	Chart htmlChart
	Rows  []htmlSoak
}

type htmlSoak struct {
	Trial    int
	Size     int
	Outcome  string
	Class    string
	Ran      string
	Steps    int
	LastPeak string
	Rising   string
	Effect   string
	Reason   string
	Moved    bool // it moved the answer down
}

// htmlSoakOf is the soak section, or nil when no soak ran.
func htmlSoakOf(run *record.Run) *htmlSoakView {
	if len(run.Soaks) == 0 {
		return nil
	}
	v := &htmlSoakView{
		Intro: fmt.Sprintf("After the search, the answer ran in a fresh process for up to %s (--soak) with no step limit, to see whether it fits a long run.",
			units.ProseDuration(run.Settings.SoakSecs)),
		Chart: htmlChartOf(run, WriteSoakChart, "Peak memory by step during --soak"),
	}
	for i, s := range run.Soaks {
		row := htmlSoak{
			Trial: s.Trial, Size: s.Size, Outcome: string(s.Outcome), Class: htmlOutcomeClass(s.Outcome),
			Ran: units.ProseDuration(s.Seconds), Steps: s.Steps, LastPeak: "–", Rising: "–",
			Effect: soakEffect(run, i), Reason: s.Reason,
		}
		if n := len(s.StepPeaks); n > 0 {
			row.LastPeak = units.Bytes(s.StepPeaks[n-1])
		}
		if s.Rising > 0 {
			row.Rising = "+" + units.Bytes(s.Rising)
		}
		row.Moved = !s.Outcome.Fits() && row.Effect != ""
		v.Rows = append(v.Rows, row)
	}
	if slices.ContainsFunc(run.Soaks, func(s record.Soak) bool { return s.WorstFirst }) {
		v.Intro += " The soak ran the whole loader's batches largest first, so that it met the training's worst batches early."
	}
	if slices.ContainsFunc(v.Rows, func(r htmlSoak) bool { return r.Moved }) {
		v.Intro += " A soak that did not fit moved the answer down, and the new answer was soaked in turn."
	}
	return v
}
