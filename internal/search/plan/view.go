package plan

// View is what a planner sees of the search.
type View struct {
	Grid Grid
	K    int // sizes per round
	// Lo is the largest size believed to fit (Grid.Min-Step when none) and
	// Hi the smallest believed not to above it (Grid.Max+Step when none):
	// the driver's bracket.
	Lo, Hi int
	// Points are the measured peaks of the sizes believed to fit below Hi,
	// in units of the memory figure, and Fit the model made from them (nil
	// when none could be made). Allocated says the figure is peak
	// allocated memory, the units of a Failure's figures.
	Allocated bool
	Points    []Point
	Fit       *Fit
	// [PeakLo, PeakHi] is where the peak at the boundary is expected to
	// be, in units of the memory figure.
	PeakLo, PeakHi float64
	// Failed is what the failure at Hi said of itself (the zero Failure
	// when nothing did, or Hi has not been tried).
	Failed Failure
	// Growth is how much the memory that decides an OOM grows a sample,
	// in bytes, from the sizes that fitted: their reserved peaks where all
	// report one that grows (an allocator cap limits reserved memory, and
	// a card runs out of it), else the fit's slope; 0 with no fit.
	Growth float64
	// Refuted says the trials contradict every window the failures and
	// the capacity give (the search's planView): the model has nothing
	// left to place the boundary with, and bisection does better than its
	// guesses.
	Refuted bool
	// Reached says [PeakLo, PeakHi] is where the failure at Hi could have
	// reached (the search's planView), not the capacity.
	Reached bool
	// Pooled says the capacity is a framework's own pool (JAX's), which
	// plans each step's buffers to fit it (the search's driver.capacity).
	Pooled bool
}

// Growing says nothing has failed yet: the bracket has no top.
func (v View) Growing() bool { return v.Hi > v.Grid.Max }

// SeenOK says some size was seen to fit: the bracket has a bottom.
func (v View) SeenOK() bool { return v.Lo >= v.Grid.Min }
