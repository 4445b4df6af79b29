package cards

import "testing"

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		mib  uint64
	}{
		{"l4", "l4", 23034}, {"L4", "l4", 23034}, {"A100-40GB", "a100-40gb", 40960}, {"a100_40gb", "a100-40gb", 40960},
		{"RTX 4090", "rtx4090", 24564}, {"4090", "rtx4090", 24564}, {"h100", "h100-80gb", 81559}, {"H200", "h200", 143771},
	} {
		c, ok := Lookup(tc.in)
		if !ok || c.Name != tc.want || c.MiB != tc.mib || c.Bytes() != tc.mib<<20 {
			t.Errorf("Lookup(%q) = %+v, %v; want %s with %d MiB", tc.in, c, ok, tc.want, tc.mib)
		}
	}
	for _, in := range []string{"", "24GiB", "a100-20gb", "tpu"} {
		if c, ok := Lookup(in); ok {
			t.Errorf("Lookup(%q) found %+v", in, c)
		}
	}
}

func TestTableIsWellFormed(t *testing.T) {
	seen := map[string]string{}
	for _, c := range Known {
		if c.Name == "" || c.Model == "" || c.MiB < 8<<10 || c.Source == "" {
			t.Errorf("incomplete card %+v", c)
		}
		// CUDA's total is NVML's less the driver's reservation, a few
		// hundred MiB; a figure further off is another variant of the card.
		if c.CUDAMiB != 0 && (c.CUDASource == "" || c.CUDAMiB >= c.MiB || c.CUDAMiB*100 < c.MiB*97) {
			t.Errorf("%s: CUDA total %d MiB (source %q) is not just below %d MiB", c.Name, c.CUDAMiB, c.CUDASource, c.MiB)
		}
		if c.CUDAMiB == 0 && c.CUDASource != "" {
			t.Errorf("%s: a CUDA source without a figure", c.Name)
		}
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if other, dup := seen[normalize(n)]; dup {
				t.Errorf("name %q of %s is also %s's", n, c.Name, other)
			}
			seen[normalize(n)] = c.Name
		}
	}
}

func TestUsable(t *testing.T) {
	for _, tc := range []struct {
		card Card
		want uint64
	}{
		{Card{MiB: 23034, CUDAMiB: 22559}, 22559 << 20},
		{Card{MiB: 23028}, 23028 << 20},
	} {
		if got := tc.card.Usable(); got != tc.want {
			t.Errorf("%+v.Usable() = %d, want %d", tc.card, got, tc.want)
		}
	}
	// The H200's figure is measured: CUDA's total there is 150109880320
	// bytes, and Usable must not claim more.
	if c, ok := Lookup("h200"); !ok || c.Usable() > 150109880320 || 150109880320-c.Usable() >= 1<<20 {
		t.Errorf("h200 Usable() = %d, want the whole MiB below 150109880320", c.Usable())
	}
}
