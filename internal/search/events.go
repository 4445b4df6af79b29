package search

// Phase is the part of the search a round belongs to.
type Phase string

// The phases, in the order a search usually passes through them.
const (
	// PhaseBracket grows from the start (×2, or a model-predicted jump)
	// until a size does not fit or the top of the range runs.
	PhaseBracket Phase = "bracket"
	// PhaseRefine narrows the bracket down to adjacent grid sizes.
	PhaseRefine Phase = "refine"
	// PhaseRecheck re-runs sizes whose results contradicted others or
	// surprised the memory model, and the proof pair before the answer.
	PhaseRecheck Phase = "recheck"
	// PhaseConfirm re-runs the answer (Config.Confirm).
	PhaseConfirm Phase = "confirm"
	// PhaseMargin looks for the size that leaves Config.MarginPercent free.
	PhaseMargin Phase = "margin"
)

// EventKind says what an Event reports.
type EventKind string

// The kinds of events.
const (
	EventPhase       EventKind = "phase"       // the phase changed
	EventBracket     EventKind = "bracket"     // Lo or Hi changed
	EventPlan        EventKind = "plan"        // Sizes are about to be probed
	EventObservation EventKind = "observation" // a trial finished
	EventConflict    EventKind = "conflict"    // a failure below a size that ran held (Conflict)
	EventRisk        EventKind = "risk"        // the failures put sizes at risk (Risk)
)

// Event is a step of the search's progress, for live displays and logs.
type Event struct {
	Kind  EventKind
	Phase Phase
	// Lo is the largest size believed to fit and Hi the smallest believed
	// not to; 0 when there is none yet.
	Lo, Hi int
	Sizes  []int // EventPlan
	// Rounds is how many rounds an EventPlan's sizes take: a round each
	// turn of the trials that run at once (Result.Rounds).
	Rounds int
	// Predicted is the model's predicted boundary (a real batch size) when
	// it planned this round; 0 when it did not.
	Predicted   float64
	Observation Observation // EventObservation
	Conflict    Conflict    // EventConflict
	Risk        *Risk       // EventRisk
}
