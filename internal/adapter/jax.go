package adapter

import (
	"context"
	"strconv"
	"strings"
)

// The environment variables through which JAX sizes XLA's memory pool, as a
// fraction of the card. Newer jaxlib refuses to start when both are set.
const (
	XLAFractionEnv       = "XLA_PYTHON_CLIENT_MEM_FRACTION"
	XLAClientFractionEnv = "XLA_CLIENT_MEM_FRACTION"
	XLAAllocatorEnv      = "XLA_PYTHON_CLIENT_ALLOCATOR"
)

// JAXDefaultFraction is the share of a card that jaxlib's pool may take
// when the program sets no fraction: 75 % of the card's memory.
const JAXDefaultFraction = 0.75

// JAXPool is the pool XLA's allocator gets on a card of card bytes under
// env: the fraction the user set (either variable; the newer
// XLA_CLIENT_MEM_FRACTION when both are), else JAXDefaultFraction, of the
// card. ok is false with XLA_PYTHON_CLIENT_ALLOCATOR=platform, which keeps
// no pool and takes memory as it is asked for. A fraction that does not
// read as one in (0, 1] counts as unset. XLA_PYTHON_CLIENT_PREALLOCATE=false
// changes when the pool is taken, not its size, so it is not read.
func JAXPool(env []string, card uint64) (pool uint64, ok bool) {
	if v, set := Lookup(env, XLAAllocatorEnv); set && v == "platform" {
		return 0, false
	}
	return uint64(float64(card) * JAXFraction(env)), true
}

// JAXFraction is the share of the card that env gives XLA's pool (JAXPool).
func JAXFraction(env []string) float64 {
	f, _ := JAXFractionSource(env)
	return f
}

// JAXFractionSource is JAXFraction and where it comes from: the variable
// as set ("XLA_PYTHON_CLIENT_MEM_FRACTION=0.5"), or "jaxlib's default".
func JAXFractionSource(env []string) (float64, string) {
	for _, key := range []string{XLAClientFractionEnv, XLAFractionEnv} {
		v, set := Lookup(env, key)
		if !set {
			continue
		}
		cap := v
		if _, limit, policy := strings.Cut(v, "-"); policy {
			cap = limit // "START-CAP": a pool that starts at START and grows to CAP
		}
		if f, err := strconv.ParseFloat(cap, 64); err == nil && f > 0 && f <= 1 {
			return f, key + "=" + v
		}
	}
	return JAXDefaultFraction, "jaxlib's default"
}

// JAX is JAX (XLA): the hook reports each local device's memory_stats()
// (peak_bytes_in_use, bytes_limit, pool_bytes), and the pool is capped
// through the XLA memory fraction. JAX preallocates 75 % of the card by
// default, so the device's memory (NVML) stays flat whatever the batch size:
// only JAX's own peak says what a trial used, and its pool (bytes_limit), not
// the card, is what a trial must fit in.
type JAX struct{}

// Name is "jax".
func (JAX) Name() string { return FrameworkJAX }

// Hooked is true: the hook reports JAX's own figures.
func (JAX) Hooked() bool { return true }

// LimitEnv makes XLA's pool limit/total of the device through exactly one
// fraction variable: the user's XLA_CLIENT_MEM_FRACTION when that is the one
// they set, else XLA_PYTHON_CLIENT_MEM_FRACTION (and the other is dropped).
// Preallocation is left as the user has it. The fraction is a bare one,
// which the jaxlib batchfit was measured with holds as a fixed pool (and
// refuses to read as START-CAP); JAXLimitEnv writes START-CAP for a jaxlib
// that grows a bare fraction's pool.
func (JAX) LimitEnv(env []string, limit, total uint64) []string {
	return JAXLimitEnv(env, limit, 0, total)
}

// JAXLimitEnv is JAX's LimitEnv for a pool that starts at start bytes
// and, when grow is set, grows to at most grow bytes: the fraction is
// then written "START-CAP", as newer jaxlib reads it (a bare fraction there
// means "preallocate it, then grow into the whole device";
// docs/design/whole-process-memory-limit.md).
func JAXLimitEnv(env []string, start, grow, total uint64) []string {
	if start == 0 || total == 0 || start > total || grow > total {
		return env
	}
	key := XLAFractionEnv
	if _, ours := Lookup(env, XLAFractionEnv); !ours {
		if _, theirs := Lookup(env, XLAClientFractionEnv); theirs {
			key = XLAClientFractionEnv
		}
	}
	// Full precision, as for torch's fraction: four decimals of a large card
	// are several MiB.
	share := func(n uint64) string { return strconv.FormatFloat(float64(n)/float64(total), 'f', -1, 64) }
	fraction := share(start)
	if grow > 0 {
		fraction += "-" + share(max(grow, start))
	}
	return append(Without(env, XLAFractionEnv, XLAClientFractionEnv), key+"="+fraction)
}

// JAXBarePool is the pool a bare fraction in env gives on a device of
// total bytes, as the jaxlib batchfit was measured with holds it; 0 when
// env sets no bare fraction (none, or START-CAP).
func JAXBarePool(env []string, total uint64) uint64 {
	for _, key := range []string{XLAClientFractionEnv, XLAFractionEnv} {
		v, set := Lookup(env, key)
		if !set {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return 0
		}
		return uint64(f * float64(total))
	}
	return 0
}

// Peaks are JAX's largest device peak, pool and pool limit.
func (JAX) Peaks(s Summary) Peaks {
	return Peaks{Allocated: s.MaxAllocated, Reserved: s.MaxPool, Limit: s.MemoryLimit}
}

// EnforcesLimit is true when JAX reported a pool limit: XLA's allocator
// fails the trial at it.
func (JAX) EnforcesLimit(s Summary) bool { return s.Framework == FrameworkJAX && s.MemoryLimit > 0 }

// Version is jax's and jaxlib's.
func (JAX) Version(ctx context.Context, argv []string) string {
	return Versions(ctx, argv, "jax", "jaxlib")
}

// JAXHoldsBareFraction says the jaxlib that versions names ("jax 0.11.2,
// jaxlib 0.11.2", as JAX's Version gives them) holds a bare memory fraction
// as a fixed pool: 0.11.2 and before, the versions batchfit was measured
// with (bench/probes/jax_default_pool.py). They also refuse START-CAP, so a
// trial's pool there never switches to it. false when the version is not
// known.
func JAXHoldsBareFraction(versions string) bool {
	_, v, ok := strings.Cut(versions, "jaxlib ")
	if !ok {
		return false
	}
	v, _, _ = strings.Cut(v, ",")
	var parts [3]int
	for i, f := range strings.SplitN(strings.TrimSpace(v), ".", 3) {
		// The leading digits: "2rc1" is 2.
		digits := f[:len(f)-len(strings.TrimLeftFunc(f, func(r rune) bool { return r >= '0' && r <= '9' }))]
		n, err := strconv.Atoi(digits)
		if err != nil {
			return false
		}
		parts[i] = n
	}
	measured := [3]int{0, 11, 2}
	for i := range parts {
		if parts[i] != measured[i] {
			return parts[i] < measured[i]
		}
	}
	return true
}
