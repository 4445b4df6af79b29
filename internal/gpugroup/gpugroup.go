// Package gpugroup splits the GPUs a run may use into groups, one search
// each, and a group into slots, one trial each: from --gpus,
// --gpus-per-trial and --per-gpu-model here, or from --constraint and
// --jobs on Slurm.
package gpugroup

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
)

// Group is a set of GPUs of one model that one search runs on, split into
// slots: each slot runs one trial at a time, pinned to its GPUs
// (CUDA_VISIBLE_DEVICES).
type Group struct {
	Name    string // the GPU model, or the Slurm constraint
	Devices []gpu.Device
	Slots   [][]int // nil: one trial at a time, not pinned
	// Constraint is the Slurm --constraint of this group's jobs.
	Constraint string
}

// Indexes are the group's GPU indexes.
func (g Group) Indexes() []int {
	out := make([]int, len(g.Devices))
	for i, d := range g.Devices {
		out[i] = d.Index
	}
	return out
}

// Spec is how a search asks for GPUs here: --gpus, --gpus-per-trial and
// --per-gpu-model.
type Spec struct {
	List     string // "all", "0,1,2,3", or "" for one trial at a time on whatever CUDA picks
	PerTrial int    // GPUs one trial spans; the batch size is per GPU
	PerModel bool   // one search per GPU model in List
	// Inherited says the environment sets CUDA_VISIBLE_DEVICES: without
	// --gpus, the trials keep it. Otherwise, on a machine of several GPUs,
	// they are pinned to the first.
	Inherited bool
}

// Local splits the machine's devices into the searches spec asks for: one
// group, or one per GPU model with PerModel.
func Local(devices []gpu.Device, spec Spec) ([]Group, error) {
	if spec.PerTrial < 1 {
		return nil, hint.Configf("--gpus-per-trial counts the GPUs one trial spans: 1 or more", "--gpus-per-trial must be at least 1, got %d", spec.PerTrial)
	}
	if spec.List == "" {
		if spec.PerTrial > 1 || spec.PerModel {
			return nil, hint.Configf("name the GPUs with --gpus 0,1 or --gpus all", "--gpus-per-trial and --per-gpu-model need --gpus")
		}
		g := Group{Devices: devices}
		if len(devices) > 0 {
			g.Name = devices[0].Name
		}
		if len(devices) > 1 && !spec.Inherited {
			// A program that sees every GPU may use them all (the HF
			// Trainer wraps its model in DataParallel, and GPU 0 then
			// holds every replica's logits: on two H200s it answered 44
			// where one GPU answers 71). Pinned, its trials run on the
			// one GPU batchfit watches.
			g.Devices, g.Slots = devices[:1], [][]int{{devices[0].Index}}
		}
		return []Group{g}, nil
	}
	chosen, err := parseGPUList(spec.List, devices)
	if err != nil {
		return nil, err
	}
	groups := byModel(chosen)
	if len(groups) > 1 && !spec.PerModel {
		names := make([]string, len(groups))
		for i, g := range groups {
			names[i] = g.Name
		}
		return nil, hint.Configf("the answer differs between models: pass --per-gpu-model for one search per model, or list GPUs of one model",
			"--gpus mixes GPU models: %s", strings.Join(names, ", "))
	}
	for i := range groups {
		if err := groups[i].split(spec.PerTrial); err != nil {
			return nil, err
		}
	}
	return groups, nil
}

// byModel groups devices by name, in the order each name first appears.
func byModel(devices []gpu.Device) []Group {
	var groups []Group
	for _, d := range devices {
		i := slices.IndexFunc(groups, func(g Group) bool { return g.Name == d.Name })
		if i < 0 {
			groups = append(groups, Group{Name: d.Name})
			i = len(groups) - 1
		}
		groups[i].Devices = append(groups[i].Devices, d)
	}
	return groups
}

// split makes the group's slots of perTrial GPUs each.
func (g *Group) split(perTrial int) error {
	n := len(g.Devices)
	if n%perTrial != 0 {
		return hint.Configf(fmt.Sprintf("list a multiple of %d GPUs of each model", perTrial),
			"%d GPUs of %s do not split into trials of %d", n, g.Name, perTrial)
	}
	for j := 0; j < n; j += perTrial {
		slot := make([]int, 0, perTrial)
		for _, d := range g.Devices[j : j+perTrial] {
			slot = append(slot, d.Index)
		}
		g.Slots = append(g.Slots, slot)
	}
	return nil
}

// parseGPUList reads "all" or a comma-separated list of GPU indexes.
func parseGPUList(s string, devices []gpu.Device) ([]gpu.Device, error) {
	if len(devices) == 0 {
		return nil, hint.Configf("--gpus pins trials to GPUs that NVML lists; run where the NVIDIA driver is", "--gpus: no GPU found")
	}
	if s == "all" {
		return devices, nil
	}
	var out []gpu.Device
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return nil, hint.Configf("give --gpus as GPU indexes such as 0,1,2,3, or all", "--gpus %q: %q is not a GPU index", s, f)
		}
		j := slices.IndexFunc(devices, func(d gpu.Device) bool { return d.Index == i })
		if j < 0 {
			return nil, hint.Configf(fmt.Sprintf("this machine has GPUs 0 to %d", len(devices)-1), "--gpus: there is no GPU %d", i)
		}
		if seen[i] {
			return nil, hint.Configf("list each GPU once", "--gpus: GPU %d is listed twice", i)
		}
		seen[i] = true
		out = append(out, devices[j])
	}
	return out, nil
}

// Slurm are the searches of a Slurm run: one per GPU type in constraint
// (comma-separated) with perModel, else one. Slots only count the jobs
// that run at once: Slurm picks the GPUs.
func Slurm(constraint string, jobs int, perModel bool) ([]Group, error) {
	constraints := []string{constraint}
	if perModel && constraint != "" {
		constraints = nil
		for _, c := range strings.Split(constraint, ",") {
			if c = strings.TrimSpace(c); c != "" {
				constraints = append(constraints, c)
			}
		}
	}
	var groups []Group
	for _, c := range constraints {
		g := Group{Name: c, Constraint: c, Slots: make([][]int, jobs)}
		if c != "" {
			// The answer's table names the card by its constraint.
			g.Devices = []gpu.Device{{Name: c}}
		}
		groups = append(groups, g)
	}
	if perModel && len(groups) < 2 {
		return nil, hint.Configf("list the GPU types to compare: --constraint a100,h100", "--per-gpu-model with --executor slurm needs several types in --constraint")
	}
	return groups, nil
}
