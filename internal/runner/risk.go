package runner

import (
	"fmt"

	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/units"
)

// riskWarning explains an answer that the failures moved down by their
// own figures (search.Risk: a framework's pool, XLA's); "" when they did
// not.
func riskWarning(res search.Result) string {
	r := res.Risk
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%d asked for %s more than its pool had free when it failed, at %s a sample: "+
		"sizes from %d up can fail as %d did, however often they ran, so %d is the safe side",
		r.From, units.Bytes(uint64(r.Shortfall)), units.Bytes(uint64(r.Slope)), r.Size, r.From, res.Max)
}
