package gpugroup

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
)

func TestLocalPerModel(t *testing.T) {
	devices := []gpu.Device{
		{Index: 0, Name: "NVIDIA H200"}, {Index: 1, Name: "NVIDIA A100-SXM4-80GB"},
		{Index: 2, Name: "NVIDIA H200"}, {Index: 3, Name: "NVIDIA A100-SXM4-80GB"},
	}
	spec := Spec{List: "all", PerTrial: 1}
	if _, err := Local(devices, spec); err == nil || !strings.Contains(err.Error(), "mixes GPU models") {
		t.Fatalf("mixed models without --per-gpu-model: %v", err)
	}
	spec.PerModel = true
	groups, err := Local(devices, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Name != "NVIDIA H200" || !reflect.DeepEqual(groups[0].Slots, [][]int{{0}, {2}}) ||
		!reflect.DeepEqual(groups[1].Slots, [][]int{{1}, {3}}) {
		t.Errorf("groups = %+v", groups)
	}
	spec.PerTrial = 2
	groups, err = Local(devices, spec)
	if err != nil || !reflect.DeepEqual(groups[1].Slots, [][]int{{1, 3}}) {
		t.Errorf("two GPUs a trial: %+v, %v", groups, err)
	}
}

func TestLocalRefusals(t *testing.T) {
	two := []gpu.Device{{Index: 0, Name: "H"}, {Index: 1, Name: "H"}}
	for _, tc := range []struct {
		name    string
		devices []gpu.Device
		spec    Spec
		want    string
	}{
		{"no GPUs a trial", two, Spec{PerTrial: 0}, "--gpus-per-trial must be at least 1"},
		{"per trial without a list", two, Spec{PerTrial: 2}, "need --gpus"},
		{"no driver", nil, Spec{List: "0", PerTrial: 1}, "no GPU found"},
		{"not an index", two, Spec{List: "0,x", PerTrial: 1}, `"x" is not a GPU index`},
		{"missing GPU", two, Spec{List: "0,5", PerTrial: 1}, "there is no GPU 5"},
		{"twice", two, Spec{List: "1,1", PerTrial: 1}, "GPU 1 is listed twice"},
		{"odd split", two, Spec{List: "all", PerTrial: 3}, "do not split into trials of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Local(tc.devices, tc.spec)
			var ce *hint.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || ce.Hint() == "" {
				t.Errorf("err = %v, want a ConfigError with a hint containing %q", err, tc.want)
			}
		})
	}
}

func TestSlurm(t *testing.T) {
	groups, err := Slurm("a100, h100,", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Constraint != "a100" || groups[1].Name != "h100" || len(groups[1].Slots) != 3 {
		t.Errorf("groups = %+v", groups)
	}
	one, err := Slurm("", 1, false)
	if err != nil || len(one) != 1 || one[0].Devices != nil {
		t.Errorf("one group without a constraint: %+v, %v", one, err)
	}
	if _, err := Slurm("a100", 1, true); err == nil {
		t.Error("--per-gpu-model with one type was accepted")
	}
}

// TestLocalPinsTheFirstGPU: without --gpus, a machine of several GPUs
// runs its trials on the first, pinned, so that a program that would use
// every GPU it sees (the HF Trainer's DataParallel) trains on the one GPU
// batchfit watches; a CUDA_VISIBLE_DEVICES of the user's own is kept.
func TestLocalPinsTheFirstGPU(t *testing.T) {
	two := []gpu.Device{{Index: 0, Name: "H"}, {Index: 1, Name: "H"}}
	for _, tc := range []struct {
		name      string
		devices   []gpu.Device
		inherited bool
		slots     [][]int
		devs      int
	}{
		{"two GPUs", two, false, [][]int{{0}}, 1},
		{"two GPUs, CUDA_VISIBLE_DEVICES set", two, true, nil, 2},
		{"one GPU", two[:1], false, nil, 1},
		{"no driver", nil, false, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups, err := Local(tc.devices, Spec{PerTrial: 1, Inherited: tc.inherited})
			if err != nil {
				t.Fatal(err)
			}
			if g := groups[0]; !reflect.DeepEqual(g.Slots, tc.slots) || len(g.Devices) != tc.devs {
				t.Errorf("group = %+v, want slots %v on %d device(s)", g, tc.slots, tc.devs)
			}
		})
	}
}
