package record

import "testing"

func TestPlanGlobalBatch(t *testing.T) {
	tests := []struct {
		name                              string
		target, devices, maxPer, multiple int
		per, accumulation, effective      int
		ok                                bool
	}{
		{"fits in one step", 256, 1, 282, 1, 256, 1, 256, true},
		{"the largest per-device size that divides", 1000, 1, 282, 1, 250, 4, 1000, true},
		{"8 devices", 4096, 8, 282, 1, 256, 2, 4096, true},
		{"a prime needs more steps, not smaller ones first", 1001, 1, 282, 1, 143, 7, 1001, true},
		{"multiples of 8", 4096, 1, 282, 8, 256, 16, 4096, true},
		{"not divisible by the devices: the nearest", 4099, 8, 282, 1, 256, 2, 4096, true},
		{"nearest above when closer", 4110, 8, 282, 1, 257, 2, 4112, true},
		{"below one device's share", 3, 8, 282, 1, 1, 1, 8, true},
		{"nothing fits", 256, 1, 0, 1, 0, 0, 0, false},
		{"no devices", 256, 0, 282, 1, 0, 0, 0, false},
	}
	for _, tt := range tests {
		g, ok := PlanGlobalBatch(tt.target, tt.devices, tt.maxPer, tt.multiple)
		if ok != tt.ok || (ok && (g.PerDevice != tt.per || g.Accumulation != tt.accumulation || g.Effective != tt.effective)) {
			t.Errorf("%s: %+v %v, want %d × %d (= %d) %v", tt.name, g, ok, tt.per, tt.accumulation, tt.effective, tt.ok)
		}
		if ok && g.PerDevice > tt.maxPer {
			t.Errorf("%s: %d per device, more than fits (%d)", tt.name, g.PerDevice, tt.maxPer)
		}
	}
	g, _ := PlanGlobalBatch(4096, 8, 282, 1)
	if got, want := g.String(), "global batch 4096 = 256 per device × 2 accumulation steps × 8 devices"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	// A prime target's only exact split is 1 per device: the plan says so,
	// and names the near plan of fewest steps.
	g, _ = PlanGlobalBatch(1009, 1, 276, 1)
	if g.PerDevice != 1 || g.Accumulation != 1009 || g.Near == nil || g.Near.PerDevice != 252 || g.Near.Accumulation != 4 {
		t.Errorf("1009 on 276: %+v, near %+v", g, g.Near)
	}
	if got, want := g.String(), "global batch 1009 = 1 per device × 1009 accumulation steps × 1 device; no larger size that fits divides 1009, and 252 per device × 4 accumulation steps = 1008 comes near"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	for _, target := range []int{1000, 1001, 256} {
		if g, _ := PlanGlobalBatch(target, 1, 282, 1); g.Near != nil {
			t.Errorf("%d: a near plan beside a good split: %+v", target, g.Near)
		}
	}
	g, _ = PlanGlobalBatch(4099, 8, 282, 1)
	if got, want := g.String(), "global batch 4099 is not a product of a size that fits and 8 devices: 256 per device × 2 accumulation steps × 8 devices = 4096"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
