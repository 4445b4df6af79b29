package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batchfit/batchfit/internal/gpu"
)

// gpuGroup is a set of GPUs of one model that one search runs on, split into
// slots: each slot runs one trial at a time (CUDA_VISIBLE_DEVICES).
type gpuGroup struct {
	name    string
	devices []gpu.Device
	slots   [][]int // nil: one trial at a time, not pinned
	// constraint is the Slurm --constraint of this group's jobs.
	constraint string
}

func (g gpuGroup) indexes() []int {
	out := make([]int, len(g.devices))
	for i, d := range g.devices {
		out[i] = d.Index
	}
	return out
}

// gpuGroups resolves --gpus, --gpus-per-trial and --per-gpu-model.
func (o *searchOptions) gpuGroups(devices []gpu.Device) ([]gpuGroup, error) {
	if o.gpusPerTrial < 1 {
		return nil, usageError("--gpus-per-trial counts the GPUs one trial spans: 1 or more", "--gpus-per-trial must be at least 1, got %d", o.gpusPerTrial)
	}
	if o.gpus == "" {
		if o.gpusPerTrial > 1 || o.perGPUModel {
			return nil, usageError("name the GPUs with --gpus 0,1 or --gpus all", "--gpus-per-trial and --per-gpu-model need --gpus")
		}
		g := gpuGroup{devices: devices}
		if len(devices) > 0 {
			g.name = devices[0].Name
		}
		return []gpuGroup{g}, nil
	}
	chosen, err := parseGPUList(o.gpus, devices)
	if err != nil {
		return nil, err
	}
	var groups []gpuGroup
	for _, d := range chosen {
		i := slices.IndexFunc(groups, func(g gpuGroup) bool { return g.name == d.Name })
		if i < 0 {
			groups = append(groups, gpuGroup{name: d.Name})
			i = len(groups) - 1
		}
		groups[i].devices = append(groups[i].devices, d)
	}
	if len(groups) > 1 && !o.perGPUModel {
		names := make([]string, len(groups))
		for i, g := range groups {
			names[i] = g.name
		}
		return nil, usageError("the answer differs between models: pass --per-gpu-model for one search per model, or list GPUs of one model",
			"--gpus mixes GPU models: %s", strings.Join(names, ", "))
	}
	for i := range groups {
		g := &groups[i]
		n := len(g.devices)
		if n%o.gpusPerTrial != 0 {
			return nil, usageError(fmt.Sprintf("list a multiple of %d GPUs of each model", o.gpusPerTrial),
				"%d GPUs of %s do not split into trials of %d", n, g.name, o.gpusPerTrial)
		}
		for j := 0; j < n; j += o.gpusPerTrial {
			slot := make([]int, 0, o.gpusPerTrial)
			for _, d := range g.devices[j : j+o.gpusPerTrial] {
				slot = append(slot, d.Index)
			}
			g.slots = append(g.slots, slot)
		}
	}
	return groups, nil
}

// parseGPUList reads "all" or a comma-separated list of GPU indexes.
func parseGPUList(s string, devices []gpu.Device) ([]gpu.Device, error) {
	if len(devices) == 0 {
		return nil, usageError("--gpus pins trials to GPUs that NVML lists; run where the NVIDIA driver is", "--gpus: no GPU found")
	}
	if s == "all" {
		return devices, nil
	}
	var out []gpu.Device
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return nil, usageError("give --gpus as GPU indexes such as 0,1,2,3, or all", "--gpus %q: %q is not a GPU index", s, f)
		}
		j := slices.IndexFunc(devices, func(d gpu.Device) bool { return d.Index == i })
		if j < 0 {
			return nil, usageError(fmt.Sprintf("this machine has GPUs 0 to %d", len(devices)-1), "--gpus: there is no GPU %d", i)
		}
		if seen[i] {
			return nil, usageError("list each GPU once", "--gpus: GPU %d is listed twice", i)
		}
		seen[i] = true
		out = append(out, devices[j])
	}
	return out, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// slurmGroups are the searches of a Slurm run: one per GPU type in
// --constraint with --per-gpu-model, else one. Slots only count the jobs
// that run at once: Slurm picks the GPUs.
func (o *searchOptions) slurmGroups() ([]gpuGroup, error) {
	var groups []gpuGroup
	for _, c := range o.exec.constraints(o.perGPUModel) {
		g := gpuGroup{name: c, constraint: c, slots: make([][]int, o.exec.parallel)}
		if c != "" {
			// The answer's table names the card by its constraint.
			g.devices = []gpu.Device{{Name: c}}
		}
		groups = append(groups, g)
	}
	if o.perGPUModel && len(groups) < 2 {
		return nil, usageError("list the GPU types to compare: --constraint a100,h100", "--per-gpu-model with --executor slurm needs several types in --constraint")
	}
	return groups, nil
}
