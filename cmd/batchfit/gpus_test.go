package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/gpu"
)

func TestGPUGroupsPerModel(t *testing.T) {
	devices := []gpu.Device{
		{Index: 0, Name: "NVIDIA H200"}, {Index: 1, Name: "NVIDIA A100-SXM4-80GB"},
		{Index: 2, Name: "NVIDIA H200"}, {Index: 3, Name: "NVIDIA A100-SXM4-80GB"},
	}
	o := &searchOptions{gpus: "all", gpusPerTrial: 1}
	if _, err := o.gpuGroups(devices); err == nil || !strings.Contains(err.Error(), "mixes GPU models") {
		t.Fatalf("mixed models without --per-gpu-model: %v", err)
	}
	o.perGPUModel = true
	groups, err := o.gpuGroups(devices)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].name != "NVIDIA H200" || !reflect.DeepEqual(groups[0].slots, [][]int{{0}, {2}}) ||
		!reflect.DeepEqual(groups[1].slots, [][]int{{1}, {3}}) {
		t.Errorf("groups = %+v", groups)
	}
	o.gpusPerTrial = 2
	groups, err = o.gpuGroups(devices)
	if err != nil || !reflect.DeepEqual(groups[1].slots, [][]int{{1, 3}}) {
		t.Errorf("two GPUs a trial: %+v, %v", groups, err)
	}
}
