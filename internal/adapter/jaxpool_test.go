package adapter

import "testing"

func TestJAXPool(t *testing.T) {
	const card = 24 << 30
	for _, tc := range []struct {
		env  []string
		pool uint64
		ok   bool
	}{
		{nil, card * 3 / 4, true}, // jaxlib's default
		{[]string{XLAFractionEnv + "=0.5"}, card / 2, true},
		{[]string{XLAFractionEnv + "=.25"}, card / 4, true},
		{[]string{XLAClientFractionEnv + "=0.5", XLAFractionEnv + "=0.9"}, card / 2, true}, // the newer variable wins
		{[]string{XLAFractionEnv + "=0.25-0.5"}, card / 2, true},                           // START-CAP: the cap
		{[]string{XLAFractionEnv + "=2"}, card * 3 / 4, true},                              // not a fraction: the default
		{[]string{XLAFractionEnv + "=lots"}, card * 3 / 4, true},
		{[]string{"XLA_PYTHON_CLIENT_PREALLOCATE=false"}, card * 3 / 4, true},
		{[]string{XLAAllocatorEnv + "=platform"}, 0, false}, // no pool
	} {
		pool, ok := JAXPool(tc.env, card)
		if pool != tc.pool || ok != tc.ok {
			t.Errorf("JAXPool(%q) = %d, %v; want %d, %v", tc.env, pool, ok, tc.pool, tc.ok)
		}
	}
}

// A pool that may grow is written START-CAP, for a jaxlib that grows a
// bare fraction's pool; in the user's variable when that is the one they
// set. JAXBarePool reads a bare fraction back.
func TestJAXLimitEnvStartCap(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		env  []string
		grow uint64
		want string
	}{
		{nil, 0, XLAFractionEnv + "=0.25"},
		{nil, 40 * gib, XLAFractionEnv + "=0.25-0.5"},
		{nil, 10 * gib, XLAFractionEnv + "=0.25-0.25"}, // never below its start
		{[]string{XLAClientFractionEnv + "=0.9"}, 40 * gib, XLAClientFractionEnv + "=0.25-0.5"},
	} {
		got := JAXLimitEnv(tc.env, 20*gib, tc.grow, 80*gib)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("JAXLimitEnv(%q, grow %d) = %q, want [%s]", tc.env, tc.grow, got, tc.want)
		}
	}
	for _, tc := range []struct {
		env  []string
		want uint64
	}{
		{[]string{XLAFractionEnv + "=0.25"}, 20 * gib},
		{[]string{XLAFractionEnv + "=0.25-0.5"}, 0},
		{nil, 0},
	} {
		if got := JAXBarePool(tc.env, 80*gib); got != tc.want {
			t.Errorf("JAXBarePool(%q) = %d, want %d", tc.env, got, tc.want)
		}
	}
}

func TestJAXHoldsBareFraction(t *testing.T) {
	for versions, want := range map[string]bool{
		"jax 0.11.2, jaxlib 0.11.2": true,
		"jax 0.4.30, jaxlib 0.4.30": true,
		"jaxlib 0.11.1":             true,
		"jax 0.12.0, jaxlib 0.12.0": false,
		"jaxlib 0.11.3":             false,
		"jaxlib 1.0":                false,
		"jaxlib 0.11.2rc1":          true,
		"jax 0.11.2":                false, // no jaxlib named: unknown
		"":                          false,
	} {
		if got := JAXHoldsBareFraction(versions); got != want {
			t.Errorf("JAXHoldsBareFraction(%q) = %v, want %v", versions, got, want)
		}
	}
}
