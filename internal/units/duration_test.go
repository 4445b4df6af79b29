package units

import (
	"math"
	"testing"
)

func TestDurations(t *testing.T) {
	for _, tt := range []struct {
		sec                    float64
		duration, rough, prose string
	}{
		{0, "0.0s", "0s", "0.0 s"},
		{1.499, "1.5s", "1s", "1.5 s"},
		{12.34, "12.3s", "12s", "12.3 s"},
		{59, "59.0s", "59s", "59.0 s"},
		{59.94, "59.9s", "1m00s", "59.9 s"},
		// Tenths would print "60.0": a minute.
		{59.96, "1m00s", "1m00s", "1 min"},
		{60, "1m00s", "1m00s", "1 min"},
		{61, "1m01s", "1m01s", "1 min 1 s"},
		{103.4, "1m43s", "1m43s", "1 min 43 s"},
		// Whole seconds round the total, never "1m60s".
		{119.7, "2m00s", "2m00s", "2 min"},
		{599.6, "10m00s", "10m00s", "10 min"},
		{3599, "59m59s", "59m59s", "59 min 59 s"},
		{3599.6, "1h00m", "1h00m", "1 h 00 min"},
		{3600, "1h00m", "1h00m", "1 h 00 min"},
		{3700, "1h02m", "1h02m", "1 h 02 min"},
		{7500, "2h05m", "2h05m", "2 h 05 min"},
		{7530, "2h06m", "2h06m", "2 h 06 min"},
		{-1, "-", "-", "–"},
		{math.NaN(), "-", "-", "–"},
	} {
		if got := Duration(tt.sec); got != tt.duration {
			t.Errorf("Duration(%v) = %q, want %q", tt.sec, got, tt.duration)
		}
		if got := RoughDuration(tt.sec); got != tt.rough {
			t.Errorf("RoughDuration(%v) = %q, want %q", tt.sec, got, tt.rough)
		}
		if got := ProseDuration(tt.sec); got != tt.prose {
			t.Errorf("ProseDuration(%v) = %q, want %q", tt.sec, got, tt.prose)
		}
	}
}
