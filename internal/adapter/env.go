package adapter

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// AllocConfEnv is the environment variable through which PyTorch's CUDA
// caching allocator takes its options.
const AllocConfEnv = "PYTORCH_CUDA_ALLOC_CONF"

// Env returns a copy of base (KEY=VALUE entries, as os.Environ gives them)
// for a trial: pythonPath (from Install) is put in front of the user's
// PYTHONPATH, which follows it unchanged, and BATCHFIT_REPORT names
// reportFile. An empty pythonPath leaves PYTHONPATH alone; an empty
// reportFile removes BATCHFIT_REPORT, so the hook stays silent. Where base
// sets a variable twice the last value counts, as in os/exec.
func Env(base []string, pythonPath, reportFile string) []string {
	userPath, hasUserPath := Lookup(base, "PYTHONPATH")
	env := Without(base, "PYTHONPATH", ReportEnv)
	switch {
	case pythonPath != "" && userPath != "":
		env = append(env, "PYTHONPATH="+pythonPath+string(os.PathListSeparator)+userPath)
	case pythonPath != "":
		env = append(env, "PYTHONPATH="+pythonPath)
	case hasUserPath:
		env = append(env, "PYTHONPATH="+userPath)
	}
	if reportFile != "" {
		env = append(env, ReportEnv+"="+reportFile)
	}
	return env
}

// Lookup returns the last value of key in env, as a program sees it.
func Lookup(env []string, key string) (value string, ok bool) {
	for _, kv := range env {
		if k, v, found := strings.Cut(kv, "="); found && k == key {
			value, ok = v, true
		}
	}
	return value, ok
}

// Without returns a copy of env without the entries of keys.
func Without(env []string, keys ...string) []string {
	out := make([]string, 0, len(env)+len(keys))
outer:
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		for _, key := range keys {
			if k == key {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}

// MergeAllocConf returns the PYTORCH_CUDA_ALLOC_CONF value that caps the
// caching allocator at fraction of the device's memory
// ("per_process_memory_fraction:F") while keeping the user's other options
// (existing, comma-separated key:value pairs) in their order. Any
// per_process_memory_fraction of the user's is replaced by ours. The fraction
// is written in full precision, since on a large card four decimals would be
// off by several MiB. A fraction outside (0, 1] asks for no cap: existing is
// returned unchanged.
func MergeAllocConf(existing string, fraction float64) string {
	if math.IsNaN(fraction) || fraction <= 0 || fraction > 1 {
		return existing
	}
	opts := withoutFraction(existing)
	opts = append(opts, allocFractionKey+":"+strconv.FormatFloat(fraction, 'f', -1, 64))
	return strings.Join(opts, ",")
}

// allocFractionKey is torch's allocator option that caps it at a share of
// the device.
const allocFractionKey = "per_process_memory_fraction"

// withoutFraction is the options of an allocator configuration other than
// its fraction.
func withoutFraction(conf string) []string {
	var opts []string
	for _, opt := range strings.Split(conf, ",") {
		opt = strings.TrimSpace(opt)
		if opt == "" {
			continue
		}
		if k, _, _ := strings.Cut(opt, ":"); strings.TrimSpace(k) != allocFractionKey {
			opts = append(opts, opt)
		}
	}
	return opts
}

// WithoutAllocFraction is torch's allocator configuration conf without its
// per_process_memory_fraction: the options torch may read when it is
// imported (a fork server's), where the cap is read when CUDA starts.
func WithoutAllocFraction(conf string) string {
	return strings.Join(withoutFraction(conf), ",")
}

// allocFraction is the fraction an allocator configuration caps torch at,
// and whether it sets one.
func allocFraction(conf string) (float64, bool) {
	for _, opt := range strings.Split(conf, ",") {
		k, v, _ := strings.Cut(opt, ":")
		if strings.TrimSpace(k) == allocFractionKey {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil && f > 0
		}
	}
	return 0, false
}

// CapNotHeld says why torch's allocator in a trial was not held to the
// fraction the trial's environment set ("" when it was, or when nothing
// tells): a program that sets its own fraction, or a torch that read
// PYTORCH_CUDA_ALLOC_CONF before the trial set it (as a fork server's
// child would if torch read it at import), ran against another limit than
// the one it is measured against.
func CapNotHeld(env []string, s Summary) string {
	conf, _ := Lookup(env, AllocConfEnv)
	want, ok := allocFraction(conf)
	got := s.MaxMemoryFraction
	if !ok || got == 0 || math.Abs(got-want) <= 1e-9*want {
		return ""
	}
	return fmt.Sprintf("torch's allocator was capped at %.6g of the GPU, not at the %.6g that batchfit's memory limit set "+
		"(the program sets its own per_process_memory_fraction, or this torch read %s before the trial set it: try --no-preload)",
		got, want, AllocConfEnv)
}
