package caveat

import (
	"fmt"

	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/units"
)

// Event is what the live progress warns of as a search turns: a
// conflict that held (the search goes on above it), or sizes the failures
// put at risk (the answer will lie below them).
func Event(ev search.Event) string {
	if r := ev.Risk; r != nil {
		return fmt.Sprintf("%d's failure puts sizes from %d up at risk (it asked for %s more than its pool had free, at %s a sample): "+
			"the answer will lie below %d, not exact unless a failure below proves the boundary", r.From, r.Size, units.Bytes(uint64(r.Shortfall)), units.Bytes(uint64(r.Slope)), r.Size)
	}
	c := ev.Conflict
	return fmt.Sprintf("not monotone: %d failed below %d, which ran, both twice: the search goes on above %d", c.Fail.Size, c.Ok.Size, c.Ok.Size)
}

// Risk explains an answer that the failures moved down by their
// own figures (search.Risk: a framework's pool, XLA's); "" when they did
// not.
func Risk(res search.Result) string {
	r := res.Risk
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%d asked for %s more than its pool had free when it failed, at %s a sample: "+
		"sizes from %d up can fail as %d did, however often they ran, so %d is the safe side",
		r.From, units.Bytes(uint64(r.Shortfall)), units.Bytes(uint64(r.Slope)), r.Size, r.From, res.Max)
}
