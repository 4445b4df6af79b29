package record

import "fmt"

// GlobalBatch is how to train at a global batch (--global-batch): the
// largest per-device batch that fits, gradient accumulation steps and
// devices, whose product is the target, or the nearest effective batch when
// no product is.
type GlobalBatch struct {
	Target       int `json:"target"`
	PerDevice    int `json:"per_device"`
	Accumulation int `json:"accumulation_steps"`
	Devices      int `json:"devices"`
	Effective    int `json:"effective"` // PerDevice × Accumulation × Devices
	// Near is set beside an exact plan whose per-device batch is less than
	// half of what fits, because no larger size that fits divides the
	// target (a prime, or twice one): the plan of fewest accumulation
	// steps, which comes near the target instead. nil otherwise.
	Near *GlobalBatch `json:"near"`
}

// Exact says whether the plan trains at exactly the target.
func (g GlobalBatch) Exact() bool { return g.Effective == g.Target }

// String says the plan in a line: "4096 = 256 per device × 2 accumulation
// steps × 8 devices".
func (g GlobalBatch) String() string {
	s := fmt.Sprintf("%d per device × %d accumulation step%s × %d device%s", g.PerDevice,
		g.Accumulation, plural(g.Accumulation), g.Devices, plural(g.Devices))
	if g.Exact() {
		if n := g.Near; n != nil {
			return fmt.Sprintf("global batch %d = %s; no larger size that fits divides %d, and %d per device × %d accumulation step%s = %d comes near",
				g.Target, s, g.Target, n.PerDevice, n.Accumulation, plural(n.Accumulation), n.Effective)
		}
		return fmt.Sprintf("global batch %d = %s", g.Target, s)
	}
	return fmt.Sprintf("global batch %d is not a product of a size that fits and %d device%s: %s = %d", g.Target,
		g.Devices, plural(g.Devices), s, g.Effective)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// PlanGlobalBatch returns the plan for target samples per optimizer step on
// devices, each running at most maxPerDevice samples (a multiple of
// multiple) at a time: the fewest accumulation steps, and so the largest
// per-device batch, that reach the target exactly; when none does, the
// fewest steps that can come near it, with the per-device batch that comes
// nearest (below on a tie). ok is false when nothing fits or an argument is
// not positive.
func PlanGlobalBatch(target, devices, maxPerDevice, multiple int) (GlobalBatch, bool) {
	if target < 1 || devices < 1 || multiple < 1 || maxPerDevice < multiple {
		return GlobalBatch{}, false
	}
	top := maxPerDevice / multiple * multiple
	plan := func(b, a int) GlobalBatch {
		return GlobalBatch{Target: target, PerDevice: b, Accumulation: a, Devices: devices, Effective: b * a * devices}
	}
	near := nearestPlan(target, devices, top, multiple)
	if target%devices == 0 {
		if b := largestDivisor(target/devices, top, multiple); b > 0 {
			exact := plan(b, target/devices/b)
			if 2*b < top && near.Accumulation < exact.Accumulation {
				exact.Near = &near
			}
			return exact, true
		}
	}
	return near, true
}

// nearestPlan is the plan of fewest accumulation steps for target on
// devices at most top samples each (a multiple of multiple): the
// per-device size on either side of target's share that comes nearest
// (below on a tie).
func nearestPlan(target, devices, top, multiple int) GlobalBatch {
	plan := func(b, a int) GlobalBatch {
		return GlobalBatch{Target: target, PerDevice: b, Accumulation: a, Devices: devices, Effective: b * a * devices}
	}
	first := max(ceilDiv(target, devices*top), 1)
	// Not reachable exactly: first steps, the per-device sizes on either side.
	per := float64(target) / float64(devices*first)
	lo := max(int(per)/multiple*multiple, multiple)
	hi := min(ceilDiv(ceilDiv(target, devices*first), multiple)*multiple, top)
	best := plan(lo, first)
	if alt := plan(hi, first); abs(alt.Effective-target) < abs(best.Effective-target) {
		best = alt
	}
	return best
}

// largestDivisor returns the largest divisor of n that is at most top and a
// multiple of multiple, or 0.
func largestDivisor(n, top, multiple int) int {
	best := 0
	for i := 1; i*i <= n; i++ {
		if n%i != 0 {
			continue
		}
		for _, d := range []int{i, n / i} {
			if d <= top && d%multiple == 0 && d > best {
				best = d
			}
		}
	}
	return best
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
