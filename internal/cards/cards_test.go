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
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if other, dup := seen[normalize(n)]; dup {
				t.Errorf("name %q of %s is also %s's", n, c.Name, other)
			}
			seen[normalize(n)] = c.Name
		}
	}
}
