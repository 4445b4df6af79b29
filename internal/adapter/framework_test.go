package adapter

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want Framework
	}{
		{"", []string{"python3", "train.py"}, Python{}},
		{"auto", []string{"python3", "train.py"}, Python{}},
		{"auto", []string{"/bin/sh", "-c", "true"}, None{}},
		{"torch", []string{"python3"}, Torch{}},
		{"jax", []string{"python3"}, JAX{}},
		{"tensorflow", []string{"python3"}, TensorFlow{}},
		{"none", []string{"python3"}, None{}},
	} {
		got, err := Choose(tc.name, tc.argv)
		if err != nil || got != tc.want {
			t.Errorf("Choose(%q, %q) = %#v, %v; want %#v", tc.name, tc.argv, got, err, tc.want)
		}
	}
	_, err := Choose("mxnet", []string{"python3"})
	var unknown *UnknownFrameworkError
	if !errors.As(err, &unknown) || unknown.Hint() != "use --framework auto, jax, none, tensorflow, torch" {
		t.Errorf("Choose(mxnet) error = %v", err)
	}
	if got, want := FrameworkNames(), []string{"auto", "jax", "none", "tensorflow", "torch"}; !slices.Equal(got, want) {
		t.Errorf("FrameworkNames() = %q, want %q", got, want)
	}
}

func TestLimitEnv(t *testing.T) {
	const gib = 1 << 30
	base := []string{"HOME=/root"}
	for _, tc := range []struct {
		name         string
		fw           Framework
		env          []string
		limit, total uint64
		want         []string
	}{
		{"torch", Torch{}, base, 24 * gib, 96 * gib, []string{"HOME=/root", "PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.25"}},
		{"torch without a limit", Torch{}, base, 0, 96 * gib, base},
		{"jax", JAX{}, base, 24 * gib, 96 * gib, []string{"HOME=/root", "XLA_PYTHON_CLIENT_MEM_FRACTION=0.25"}},
		{"jax: the user's python variable replaced", JAX{}, []string{"XLA_PYTHON_CLIENT_MEM_FRACTION=.9", "HOME=/root"}, 24 * gib, 96 * gib,
			[]string{"HOME=/root", "XLA_PYTHON_CLIENT_MEM_FRACTION=0.25"}},
		{"jax: the user's client variable kept as the one", JAX{}, []string{"XLA_CLIENT_MEM_FRACTION=.9", "HOME=/root"}, 24 * gib, 96 * gib,
			[]string{"HOME=/root", "XLA_CLIENT_MEM_FRACTION=0.25"}},
		{"jax: both set, one left", JAX{}, []string{"XLA_CLIENT_MEM_FRACTION=.9", "XLA_PYTHON_CLIENT_MEM_FRACTION=.8"}, 24 * gib, 96 * gib,
			[]string{"XLA_PYTHON_CLIENT_MEM_FRACTION=0.25"}},
		{"jax: full precision", JAX{}, nil, 24 * gib, 141 * gib, []string{"XLA_PYTHON_CLIENT_MEM_FRACTION=0.1702127659574468"}},
		{"jax without a limit leaves preallocation alone", JAX{}, []string{"XLA_PYTHON_CLIENT_PREALLOCATE=false"}, 0, 96 * gib, []string{"XLA_PYTHON_CLIENT_PREALLOCATE=false"}},
		{"jax: a limit above the card", JAX{}, base, 100 * gib, 96 * gib, base},
		{"tensorflow", TensorFlow{}, []string{"BATCHFIT_TF_MEMORY_LIMIT_MB=1"}, 24*gib + 1, 96 * gib, []string{"BATCHFIT_TF_MEMORY_LIMIT_MB=24576"}},
		{"tensorflow without a limit", TensorFlow{}, base, 0, 96 * gib, base},
		{"python: all three", Python{}, base, 24 * gib, 96 * gib, []string{"HOME=/root", "PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.25",
			"XLA_PYTHON_CLIENT_MEM_FRACTION=0.25", "BATCHFIT_TF_MEMORY_LIMIT_MB=24576"}},
		{"none", None{}, base, 24 * gib, 96 * gib, base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fw.LimitEnv(slices.Clone(tc.env), tc.limit, tc.total); !slices.Equal(got, tc.want) {
				t.Errorf("LimitEnv = %q, want %q", got, tc.want)
			}
		})
	}
}

// Each framework reads its own figures; Python reads those of the
// framework that reported.
func TestPeaksAndEnforcesLimit(t *testing.T) {
	torch := Summary{Framework: "torch", MaxAllocated: 10, MaxReserved: 12}
	jax := Summary{Framework: "jax", MaxAllocated: 20, MaxPool: 75, MemoryLimit: 75}
	jaxCPU := Summary{Events: 1}
	tf := Summary{Framework: "tensorflow", MaxAllocated: 30, MemoryLimit: 40}
	tfUnlimited := Summary{Framework: "tensorflow", MaxAllocated: 30}
	for _, tc := range []struct {
		name    string
		fw      Framework
		s       Summary
		peaks   Peaks
		enforce bool
	}{
		{"torch", Torch{}, torch, Peaks{Allocated: 10, Reserved: 12}, true},
		{"jax", JAX{}, jax, Peaks{Allocated: 20, Reserved: 75, Limit: 75}, true},
		{"jax on cpu", JAX{}, jaxCPU, Peaks{}, false},
		{"tensorflow", TensorFlow{}, tf, Peaks{Allocated: 30, Limit: 40}, true},
		{"tensorflow without a limit", TensorFlow{}, tfUnlimited, Peaks{Allocated: 30}, false},
		{"python: torch", Python{}, torch, Peaks{Allocated: 10, Reserved: 12}, true},
		{"python: jax", Python{}, jax, Peaks{Allocated: 20, Reserved: 75, Limit: 75}, true},
		{"python: tensorflow", Python{}, tf, Peaks{Allocated: 30, Limit: 40}, true},
		{"python: nothing reported", Python{}, jaxCPU, Peaks{}, false},
		{"none", None{}, jax, Peaks{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fw.Peaks(tc.s); !reflect.DeepEqual(got, tc.peaks) {
				t.Errorf("Peaks = %+v, want %+v", got, tc.peaks)
			}
			if got := tc.fw.EnforcesLimit(tc.s); got != tc.enforce {
				t.Errorf("EnforcesLimit = %v, want %v", got, tc.enforce)
			}
		})
	}
}
