package store

import (
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/record"
)

// TestFingerprintEncoding pins the canonical encoding and its hash: they are
// part of the database format, and a change here silently empties every
// user's cache.
func TestFingerprintEncoding(t *testing.T) {
	r := &record.Run{
		Command: []string{"python", "train.py", "--bs", "{}", "a b\nc"},
		Dir:     "/w",
		GPU: &record.GPUInfo{Devices: []gpu.Device{
			{Name: "NVIDIA H200", Total: 150754820096, Driver: "580.65.06"},
			{Name: "NVIDIA H200", Total: 150754820096, Driver: "580.65.06"},
		}},
		Torch:    "2.11.0+cu130",
		Settings: record.Settings{Min: 1, Max: 4096, MultipleOf: 8, Steps: 3, MemoryLimit: 25769803776},
	}
	const want = "batchfit fingerprint v1\n" +
		"command 5\n" +
		"6:python\n" +
		"8:train.py\n" +
		"4:--bs\n" +
		"2:{}\n" +
		"5:a b\nc\n" +
		"dir 2:/w\n" +
		"gpus 2\n" +
		"gpu 11:NVIDIA H200 150754820096 9:580.65.06\n" +
		"gpu 11:NVIDIA H200 150754820096 9:580.65.06\n" +
		"memory_limit 25769803776\n" +
		"steps 3\n" +
		"torch 12:2.11.0+cu130\n" +
		"min 1\n" +
		"max 4096\n" +
		"multiple_of 8\n" +
		"simulated 0\n"
	if got := string(fingerprintText(r, 1)); got != want {
		t.Fatalf("encoding changed\n got %q\nwant %q", got, want)
	}
	// Computed independently: printf '<the text above>' | sha256sum
	if got, want := digest(fingerprintText(r, 1)), "7799c0e742d542949d65627f41ff9052741dc3e58e35a75f2dfbd97a84f7d207"; got != want {
		t.Fatalf("Fingerprint = %s, want %s", got, want)
	}
	if got, want := CommandKey(r), "1ff79511053ff0b68016e2aa21d39859a947fa6ef8183002a7045cee006e8cdc"; got != want {
		t.Fatalf("CommandKey = %s, want %s", got, want)
	}
}

// TestFingerprintEncodingV2 pins version 2: version 1's lines and what runs.
func TestFingerprintEncodingV2(t *testing.T) {
	r := &record.Run{
		Command:  []string{"python", "train.py"},
		Dir:      "/w",
		Settings: record.Settings{Min: 1, Max: 64, MultipleOf: 1, Steps: 3},
		Inputs: &record.Inputs{
			Files:  []record.File{{Path: "train.py", Hash: "sha256:ab"}},
			Git:    &record.Git{Commit: "c0ffee", Diff: "d1ff"},
			Env:    []string{"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"},
			Loaded: []record.File{{Path: "/w/model.py", Hash: "sha256:cd"}},
		},
	}
	const want = "batchfit fingerprint v2\n" +
		"command 2\n" +
		"6:python\n" +
		"8:train.py\n" +
		"dir 2:/w\n" +
		"gpus 0\n" +
		"memory_limit 0\n" +
		"steps 3\n" +
		"torch 0:\n" +
		"min 1\n" +
		"max 64\n" +
		"multiple_of 1\n" +
		"simulated 0\n" +
		"files 1\n" +
		"8:train.py 9:sha256:ab\n" +
		"git 1\n" +
		"6:c0ffee 4:d1ff\n" +
		"env 1\n" +
		"48:PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
	if got := string(fingerprintText(r, 2)); got != want {
		t.Fatalf("encoding changed\n got %q\nwant %q", got, want)
	}
	// Computed independently: printf '<the text above>' | sha256sum
	if got, want := digest(fingerprintText(r, 2)), "002ac81bcf8c22ab828b4e09d1a4129d379bafdb969ec8ddac063433a59c981a"; got != want {
		t.Fatalf("Fingerprint = %s, want %s (version 2)", got, want)
	}
	// No inputs at all (--no-db's runs, the demo) still differ from v1.
	r.Inputs = nil
	if digest(fingerprintText(r, 2)) == digest(fingerprintText(r, 1)) {
		t.Fatal("a version 2 fingerprint equals version 1's")
	}
}

// TestFingerprintEncodingV3 pins version 3: version 2's lines and the
// memory limit's scope, so that an answer found with only the allocator
// capped never stands in for one held to the whole process.
func TestFingerprintEncodingV3(t *testing.T) {
	r := &record.Run{
		Command:  []string{"python", "train.py"},
		Dir:      "/w",
		Settings: record.Settings{Min: 1, Max: 64, MultipleOf: 1, Steps: 3, MemoryLimit: 1 << 30, MemoryLimitScope: "process"},
	}
	const want = "batchfit fingerprint v3\n" +
		"command 2\n" +
		"6:python\n" +
		"8:train.py\n" +
		"dir 2:/w\n" +
		"gpus 0\n" +
		"memory_limit 1073741824\n" +
		"steps 3\n" +
		"torch 0:\n" +
		"min 1\n" +
		"max 64\n" +
		"multiple_of 1\n" +
		"simulated 0\n" +
		"files 0\n" +
		"git 0\n" +
		"env 0\n" +
		"memory_limit_scope 7:process\n"
	if got := string(fingerprintText(r, 3)); got != want {
		t.Fatalf("encoding changed\n got %q\nwant %q", got, want)
	}
	process := Fingerprint(r)
	r.Settings.MemoryLimitScope = "allocator"
	if Fingerprint(r) == process {
		t.Fatal("the limit's scope is not in the fingerprint")
	}
}

// TestFingerprintEncodingV4 pins version 4: version 3's lines and the
// program that runs, so that another program of the same name, or the same
// one edited, never answers from the cache.
func TestFingerprintEncodingV4(t *testing.T) {
	r := &record.Run{
		Command:  []string{"mytrainer", "{}"},
		Dir:      "/w",
		Settings: record.Settings{Min: 1, Max: 64, MultipleOf: 1, Steps: 3},
		Inputs:   &record.Inputs{Executable: &record.File{Path: "/opt/bin/mytrainer", Hash: "sha256:ab"}},
	}
	const want = "batchfit fingerprint v4\n" +
		"command 2\n" +
		"9:mytrainer\n" +
		"2:{}\n" +
		"dir 2:/w\n" +
		"gpus 0\n" +
		"memory_limit 0\n" +
		"steps 3\n" +
		"torch 0:\n" +
		"min 1\n" +
		"max 64\n" +
		"multiple_of 1\n" +
		"simulated 0\n" +
		"files 0\n" +
		"git 0\n" +
		"env 0\n" +
		"memory_limit_scope 0:\n" +
		"executable 1\n" +
		"18:/opt/bin/mytrainer 9:sha256:ab\n"
	if got := string(fingerprintText(r, 4)); got != want {
		t.Fatalf("encoding changed\n got %q\nwant %q", got, want)
	}
	// Computed independently: printf '<the text above>' | sha256sum
	if got, want := digest(fingerprintText(r, 4)), "39778b32fa4a7a90c3f1548beca97eb3d0b00e0a5fb2bf4c1aa782a198355ba9"; got != want {
		t.Fatalf("Fingerprint = %s, want %s (version 4)", got, want)
	}
	found := Fingerprint(r)
	r.Inputs.Executable = nil
	if got, want := string(fingerprintText(r, 4)), strings.TrimSuffix(want, "executable 1\n18:/opt/bin/mytrainer 9:sha256:ab\n")+"executable 0\n"; got != want {
		t.Fatalf("encoding without an executable\n got %q\nwant %q", got, want)
	}
	if Fingerprint(r) == found {
		t.Fatal("the executable is not in the fingerprint")
	}
}

// TestFingerprintEncodingV5: version 5 has version 4's lines under its own
// first line, so that no run recorded before held proofs answers now.
func TestFingerprintEncodingV5(t *testing.T) {
	r := sampleRun()
	v4, v5 := string(fingerprintText(r, 4)), string(fingerprintText(r, 5))
	if want := strings.Replace(v4, "batchfit fingerprint v4\n", "batchfit fingerprint v5\n", 1); v5 != want {
		t.Fatalf("version 5\n got %q\nwant %q", v5, want)
	}
}

// TestFingerprintEncodingV6: version 6 is version 5's lines and
// --worst-case, which decides which batches a trial meets.
func TestFingerprintEncodingV6(t *testing.T) {
	r := sampleRun()
	r.Settings.WorstCase = "on"
	v5, v6 := string(fingerprintText(r, 5)), string(fingerprintText(r, 6))
	if want := strings.Replace(v5, "batchfit fingerprint v5\n", "batchfit fingerprint v6\n", 1) + "worst_case 2:on\n"; v6 != want {
		t.Fatalf("version 6\n got %q\nwant %q", v6, want)
	}
	if Fingerprint(r) != digest([]byte(v6)) {
		t.Fatal("Fingerprint does not write version 6")
	}
	on := Fingerprint(r)
	r.Settings.WorstCase = "off"
	if Fingerprint(r) == on {
		t.Fatal("--worst-case is not in the fingerprint")
	}
}

// TestFingerprintFields checks that every field of the question changes the
// fingerprint and that no field of the way it is answered does.
func TestFingerprintFields(t *testing.T) {
	base := func() *record.Run {
		r := sampleRun()
		r.Inputs = &record.Inputs{
			Files:      []record.File{{Path: "conf.yaml", Hash: "sha256:01"}},
			Git:        &record.Git{Commit: "abc", Diff: "def"},
			Env:        []string{"OMP_NUM_THREADS=4", "PYTORCH_CUDA_ALLOC_CONF=x"},
			Loaded:     []record.File{{Path: "/w/model.py", Hash: "sha256:02"}},
			Executable: &record.File{Path: "/usr/bin/python", Hash: "sha256:07"},
		}
		r.GPU.Devices = append(r.GPU.Devices, gpu.Device{Index: 1, UUID: "GPU-5678", Name: "NVIDIA H200",
			Total: 150 << 30, Driver: "580.65", CUDA: "13.0"})
		return r
	}
	changes := []struct {
		name    string
		edit    func(*record.Run)
		command bool // the command key changes too
	}{
		{"argument", func(r *record.Run) { r.Command[1] = "train2.py" }, true},
		{"argument split", func(r *record.Run) { r.Command = append(r.Command[:4:4], "--max-steps 3") }, true},
		{"placeholder moved", func(r *record.Run) { r.Command[3], r.Command[5] = r.Command[5], r.Command[3] }, true},
		{"extra argument", func(r *record.Run) { r.Command = append(r.Command, "") }, true},
		{"dir", func(r *record.Run) { r.Dir = "/home/u/other" }, true},
		{"gpu name", func(r *record.Run) { r.GPU.Devices[1].Name = "NVIDIA H100" }, false},
		{"gpu memory", func(r *record.Run) { r.GPU.Devices[0].Total = 141 << 30 }, false},
		{"driver", func(r *record.Run) { r.GPU.Devices[0].Driver = "575.1" }, false},
		{"one gpu fewer", func(r *record.Run) { r.GPU.Devices = r.GPU.Devices[:1] }, false},
		{"no gpu", func(r *record.Run) { r.GPU = nil }, false},
		{"memory limit", func(r *record.Run) { r.Settings.MemoryLimit = 16 << 30 }, false},
		{"no memory limit", func(r *record.Run) { r.Settings.MemoryLimit = 0 }, false},
		{"steps", func(r *record.Run) { r.Settings.Steps = 5 }, false},
		{"torch", func(r *record.Run) { r.Torch = "2.10.0" }, false},
		{"min", func(r *record.Run) { r.Settings.Min = 2 }, false},
		{"max", func(r *record.Run) { r.Settings.Max = 1024 }, false},
		{"multiple of", func(r *record.Run) { r.Settings.MultipleOf = 8 }, false},
		{"simulated", func(r *record.Run) { r.Simulated = true }, false},
		{"args file edited", func(r *record.Run) { r.Inputs.Files[0].Hash = "sha256:03" }, false},
		{"args file renamed", func(r *record.Run) { r.Inputs.Files[0].Path = "conf2.yaml" }, false},
		{"args file added", func(r *record.Run) {
			r.Inputs.Files = append(r.Inputs.Files, record.File{Path: "b.yaml", Hash: "sha256:04"})
		}, false},
		{"no args file", func(r *record.Run) { r.Inputs.Files = nil }, false},
		{"commit", func(r *record.Run) { r.Inputs.Git.Commit = "abd" }, false},
		{"diff", func(r *record.Run) { r.Inputs.Git.Diff = "deg" }, false},
		{"no repository", func(r *record.Run) { r.Inputs.Git = nil }, false},
		{"env value", func(r *record.Run) { r.Inputs.Env[1] = "PYTORCH_CUDA_ALLOC_CONF=y" }, false},
		{"env added", func(r *record.Run) { r.Inputs.Env = append(r.Inputs.Env, "XLA_FLAGS=z") }, false},
		{"env removed", func(r *record.Run) { r.Inputs.Env = r.Inputs.Env[:1] }, false},
		{"executable edited", func(r *record.Run) { r.Inputs.Executable.Hash = "sha256:06" }, false},
		{"another executable first on PATH", func(r *record.Run) { r.Inputs.Executable.Path = "/home/u/bin/python" }, false},
		{"executable not found", func(r *record.Run) { r.Inputs.Executable = nil }, false},
	}
	same := []struct {
		name string
		edit func(*record.Run)
	}{
		{"timeout", func(r *record.Run) { r.Settings.TimeoutSecs = 60 }},
		{"strategy", func(r *record.Run) { r.Settings.Strategy = "bisect" }},
		{"confirm", func(r *record.Run) { r.Settings.Confirm = 5 }},
		{"start", func(r *record.Run) { r.Settings.Start = 256 }},
		{"margin", func(r *record.Run) { r.Settings.Margin = 10 }},
		{"parallel", func(r *record.Run) { r.Settings.Parallel = 4 }},
		{"framework", func(r *record.Run) { r.Settings.Framework = "none" }},
		{"gpu uuid and index", func(r *record.Run) { r.GPU.Devices[0].UUID, r.GPU.Devices[0].Index = "GPU-x", 3 }},
		{"cuda version", func(r *record.Run) { r.GPU.Devices[0].CUDA = "12.8" }},
		{"capacity", func(r *record.Run) { r.GPU.Capacity = 1 }},
		{"identity and outcome", func(r *record.Run) {
			r.ID, r.Fingerprint, r.Status, r.Answer, r.FirstFailure = "x", "y", record.Failed, 7, 8
			r.Started, r.Finished, r.Seconds = time.Now(), time.Now(), 3
			r.Margin, r.Recommended, r.Rounds, r.Error, r.LogDir = 1, 2, 3, "e", "/l"
			r.Version, r.Cached, r.Warnings = "9.9", true, []string{"w"}
			r.NonMonotonic, r.Model = nil, nil
		}},
		{"loaded files, checked at lookup", func(r *record.Run) { r.Inputs.Loaded[0].Hash = "sha256:05" }},
		{"cached from", func(r *record.Run) { r.CachedFrom = "x" }},
		{"trials", func(r *record.Run) { r.Trials = append(r.Trials, record.Trial{N: 9, Outcome: classify.OOM}) }},
	}
	b := base()
	fp, key := Fingerprint(b), CommandKey(b)
	seen := map[string]string{fp: "base"}
	for _, c := range changes {
		r := base()
		c.edit(r)
		got := Fingerprint(r)
		if prev, ok := seen[got]; ok {
			t.Errorf("%s: fingerprint equals that of %s", c.name, prev)
		}
		seen[got] = c.name
		if k := CommandKey(r); (k != key) != c.command {
			t.Errorf("%s: command key changed = %v, want %v", c.name, k != key, c.command)
		}
	}
	for _, c := range same {
		r := base()
		c.edit(r)
		if got := Fingerprint(r); got != fp {
			t.Errorf("%s changed the fingerprint", c.name)
		}
		if k := CommandKey(r); k != key {
			t.Errorf("%s changed the command key", c.name)
		}
	}
}
