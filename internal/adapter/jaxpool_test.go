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

// A fixed pool is written START-CAP, for a jaxlib that grows a bare
// fraction's pool; in the user's variable when that is the one they set.
func TestJAXLimitEnvFixed(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		env   []string
		fixed bool
		want  string
	}{
		{nil, false, XLAFractionEnv + "=0.25"},
		{nil, true, XLAFractionEnv + "=0.25-0.25"},
		{[]string{XLAClientFractionEnv + "=0.9"}, true, XLAClientFractionEnv + "=0.25-0.25"},
	} {
		got := JAXLimitEnv(tc.env, 20*gib, 80*gib, tc.fixed)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("JAXLimitEnv(%q, fixed %v) = %q, want [%s]", tc.env, tc.fixed, got, tc.want)
		}
	}
}
