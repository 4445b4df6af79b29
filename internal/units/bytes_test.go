package units

import (
	"math"
	"testing"
)

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1<<20 - 1, "1024.0 KiB"},
		{1 << 20, "1.0 MiB"},
		{780 << 20, "780.0 MiB"},
		{1536 << 20, "1.50 GiB"},
		{24 << 30, "24.00 GiB"},
		{3 << 40, "3072.00 GiB"},
	} {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestSignedBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{2 << 20, "2.0 MiB"},
		{-2 << 20, "-2.0 MiB"},
		{-1, "-1 B"},
		{math.MinInt64, "-8589934592.00 GiB"},
	} {
		if got := SignedBytes(tt.n); got != tt.want {
			t.Errorf("SignedBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in      string
		bytes   uint64
		percent float64
		err     string
	}{
		{in: "24GiB", bytes: 24 << 30},
		{in: "24gib", bytes: 24 << 30},
		{in: "40GB", bytes: 40 << 30},
		{in: "24gb", bytes: 24 << 30},
		{in: "1.5 TiB", bytes: 3 << 39},
		{in: "512MiB", bytes: 512 << 20},
		{in: "2k", bytes: 2048},
		{in: "123456", bytes: 123456},
		{in: "123456 B", bytes: 123456},
		{in: " 7 ", bytes: 7},
		{in: "80%", percent: 80},
		{in: "12.5 %", percent: 12.5},
		{in: "100%", percent: 100},
		{in: "0%", err: "a percentage must be a number in (0, 100]"},
		{in: "101%", err: "a percentage must be a number in (0, 100]"},
		{in: "NaN%", err: "a percentage must be a number in (0, 100]"},
		{in: "x%", err: "a percentage must be a number in (0, 100]"},
		{in: "24XB", err: `unknown unit "XB"`},
		{in: "-1GiB", err: `unknown unit "-1GiB"`},
		{in: "GiB", err: "not a positive size"},
		{in: "", err: "not a positive size"},
		{in: "0", err: "not a positive size"},
		{in: "1.2.3", err: "not a positive size"},
		{in: "5000000TB", err: "too large"},
	} {
		b, p, err := ParseSize(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseSize(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || b != tt.bytes || p != tt.percent {
			t.Errorf("ParseSize(%q) = %d, %v, %v; want %d, %v", tt.in, b, p, err, tt.bytes, tt.percent)
		}
	}
}
