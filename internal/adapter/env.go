package adapter

import (
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
	const key = "per_process_memory_fraction"
	var opts []string
	for _, opt := range strings.Split(existing, ",") {
		opt = strings.TrimSpace(opt)
		if opt == "" {
			continue
		}
		k, _, _ := strings.Cut(opt, ":")
		if strings.TrimSpace(k) == key {
			continue
		}
		opts = append(opts, opt)
	}
	opts = append(opts, key+":"+strconv.FormatFloat(fraction, 'f', -1, 64))
	return strings.Join(opts, ",")
}
