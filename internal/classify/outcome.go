// Package classify decides how a finished trial ended: it fits, it ran out of
// GPU or host memory, it hit a size limit, it hung, it was canceled, or the
// command is broken. It reads the adapter's structured event first and known
// error signatures second, matched on the whole output as the trial writes it
// (Scanner).
package classify

// Outcome is how one trial ended.
type Outcome string

// The outcomes a trial can have. OOM, HostOOM and SizeLimit all mean "does
// not fit" but are reported apart so the user sees which limit was hit.
const (
	OK        Outcome = "ok"
	OOM       Outcome = "oom"
	HostOOM   Outcome = "host_oom"
	SizeLimit Outcome = "size_limit"
	Timeout   Outcome = "timeout"
	Crash     Outcome = "crash"
	Canceled  Outcome = "canceled"
)

// Fits reports whether the trial ran at its batch size.
func (o Outcome) Fits() bool { return o == OK }

// TooLarge reports whether the outcome means the batch size does not fit.
// A timeout counts: a trial that cannot finish its steps within the limit
// is not usable at that size, and the summary flags it apart.
func (o Outcome) TooLarge() bool {
	switch o {
	case OOM, HostOOM, SizeLimit, Timeout:
		return true
	}
	return false
}

// Valid reports whether o is one of the known outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OK, OOM, HostOOM, SizeLimit, Timeout, Crash, Canceled:
		return true
	}
	return false
}
