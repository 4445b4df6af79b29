package units

import (
	"fmt"
	"math"
)

// The duration formats take seconds as a float64, the unit batchfit's
// records keep times in. There are three because they serve three readers;
// past a minute they round alike, so a time reads the same wherever it is
// shown.

// Duration formats a measured time for a terminal: tenths of a second under
// a minute ("12.3s"), whole seconds under an hour ("1m43s"), whole minutes
// after ("2h05m"); "-", as in a table, when the time is negative or unknown
// (NaN).
func Duration(sec float64) string {
	switch {
	case sec < 0 || math.IsNaN(sec):
		return "-"
	case sec < 59.95: // 59.95 and above would print as "60.0s": a minute
		return fmt.Sprintf("%.1fs", sec)
	}
	return RoughDuration(sec)
}

// RoughDuration formats an elapsed time or an estimate to the second ("12s",
// "1m43s", "2h05m"): tenths would claim a precision an estimate does not
// have, and flicker on a live screen. It is "-" when the time is negative
// or unknown (NaN).
func RoughDuration(sec float64) string {
	if sec < 0 || math.IsNaN(sec) {
		return "-"
	}
	s := int(math.Round(sec))
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	m := int(math.Round(sec / 60))
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}

// ProseDuration formats a time for a page that is read rather than
// scanned: "12.3 s", "1 min", "1 min 43 s", "2 h 05 min"; "–" when the
// time is negative or unknown (NaN).
func ProseDuration(sec float64) string {
	switch {
	case sec < 0 || math.IsNaN(sec):
		return "–"
	case sec < 59.95:
		return fmt.Sprintf("%.1f s", sec)
	}
	s := int(math.Round(sec))
	switch {
	case s < 3600 && s%60 == 0:
		return fmt.Sprintf("%d min", s/60)
	case s < 3600:
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	}
	m := int(math.Round(sec / 60))
	return fmt.Sprintf("%d h %02d min", m/60, m%60)
}
