package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bytes formats a byte count in binary units, the way batchfit shows memory
// everywhere: "23.65 GiB", "512.0 MiB", "3.0 KiB", "17 B".
func Bytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// SignedBytes formats a byte count that may be negative, such as memory
// left allocated above (or below) a baseline.
func SignedBytes(b int64) string {
	if b < 0 {
		return "-" + Bytes(uint64(-b))
	}
	return Bytes(uint64(b))
}

// sizeUnits are powers of two whether or not they carry the "i": GPU makers
// sell a card with 24 GiB of memory as "24GB", and a user who types 24GB
// means that card, not 24×10⁹ bytes (7 % less at 100 GB).
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseSize reads a size as a user types it: "24GiB", "24GB", "1.5 TiB",
// "123456" (bytes) or "80%" (a share of something the caller knows). Unit
// names are case-insensitive and all powers of two, as GPU makers use GB
// (see sizeUnits). Exactly one of bytes and percent is non-zero on success.
func ParseSize(s string) (bytes uint64, percent float64, err error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 || v > 100 || math.IsNaN(v) {
			return 0, 0, fmt.Errorf("a percentage must be a number in (0, 100]")
		}
		return 0, v, nil
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, 0, fmt.Errorf("unknown unit %q", s[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, 0, fmt.Errorf("not a positive size")
	}
	b := v * mult
	if b > 1<<62 {
		return 0, 0, fmt.Errorf("too large")
	}
	return uint64(b), 0, nil
}
