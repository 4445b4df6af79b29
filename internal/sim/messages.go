package sim

import (
	"fmt"
	"sort"
	"strings"
)

// The texts below imitate what Python and PyTorch 2.x print, closely enough
// that batchfit's classifier reads a simulated trial exactly as a real one.

const sitePackages = "/usr/local/lib/python3.12/site-packages"

// formatSize is c10's format_size: two decimals, binary units, "bytes" up to
// 1 KiB and each unit up to and including its upper bound.
func formatSize(n uint64) string {
	switch {
	case n <= KiB:
		return fmt.Sprintf("%d bytes", n)
	case n <= MiB:
		return fmt.Sprintf("%.2f KiB", float64(n)/float64(KiB))
	case n <= GiB:
		return fmt.Sprintf("%.2f MiB", float64(n)/float64(MiB))
	default:
		return fmt.Sprintf("%.2f GiB", float64(n)/float64(GiB))
	}
}

// Phases of the simulated training script, each with the stack a real
// failure there would show.
type phase int

const (
	phaseSetup   phase = iota // model.cuda(), optimizer state
	phaseData                 // building the batch on the host
	phaseForward              // the backbone's convolutions
	phaseHead                 // the projection head
)

func (w Workload) script() string {
	name := w.Name
	if name == "" {
		name = "train"
	}
	return "/home/user/" + name + "/train.py"
}

func (w Workload) traceback(p phase) string {
	s := w.script()
	var b strings.Builder
	b.WriteString("Traceback (most recent call last):\n")
	frame := func(file string, line int, fn, code string) {
		fmt.Fprintf(&b, "  File %q, line %d, in %s\n    %s\n", file, line, fn, code)
	}
	module := sitePackages + "/torch/nn/modules/module.py"
	call := func() {
		frame(module, 1775, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)")
		frame(module, 1786, "_call_impl", "return forward_call(*args, **kwargs)")
	}
	frame(s, 214, "<module>", "main()")
	switch p {
	case phaseSetup:
		frame(s, 176, "main", "model = SimCLR(resnet50(), proj_dim=128).cuda()")
		frame(module, 1084, "cuda", "return self._apply(lambda t: t.cuda(device))")
		frame(module, 930, "_apply", "param_applied = fn(param)")
		frame(module, 1084, "<lambda>", "return self._apply(lambda t: t.cuda(device))")
	case phaseData:
		frame(s, 199, "main", "views = loader.next_batch(args.batch_size)")
		frame(s, 61, "next_batch", "x = torch.empty((2 * n, 3, 224, 224), dtype=torch.uint8).pin_memory()")
	case phaseForward, phaseHead:
		frame(s, 201, "main", "loss = train_step(model, optimizer, scaler, views)")
		frame(s, 142, "train_step", "z = model(torch.cat(views))")
		call()
		frame(s, 96, "forward", "return self.head(self.backbone(x))")
		call()
		if p == phaseHead {
			frame(sitePackages+"/torch/nn/modules/linear.py", 134, "forward", "return F.linear(input, self.weight, self.bias)")
			break
		}
		resnet := sitePackages + "/torchvision/models/resnet.py"
		frame(resnet, 285, "forward", "return self._forward_impl(x)")
		frame(resnet, 273, "_forward_impl", "x = self.layer2(x)")
		call()
		frame(sitePackages+"/torch/nn/modules/container.py", 244, "forward", "input = module(input)")
		call()
		frame(resnet, 150, "forward", "out = self.conv2(out)")
		call()
		conv := sitePackages + "/torch/nn/modules/conv.py"
		frame(conv, 548, "forward", "return self._conv_forward(input, self.weight, self.bias)")
		frame(conv, 543, "_conv_forward", "return F.conv2d(")
	}
	return b.String()
}

// cudaErrorNote is what torch appends to every CUDA runtime error.
const cudaErrorNote = "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n" +
	"For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n" +
	"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"

// oomInfo is the allocator's view at the failed allocation.
type oomInfo struct {
	tried     uint64
	total     uint64
	free      uint64
	process   uint64         // this process, including non-PyTorch memory
	others    map[int]uint64 // other processes on the device
	allowed   uint64         // the fraction cap, 0 if none set
	allocated uint64
	reserved  uint64
}

// oomMessage is the exception line torch 2.x raises when the caching
// allocator cannot get memory.
func oomMessage(i oomInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s of which %s is free. ",
		formatSize(i.tried), formatSize(i.total), formatSize(i.free))
	pids := make([]int, 0, len(i.others))
	for pid := range i.others {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		fmt.Fprintf(&b, "Process %d has %s memory in use. ", pid, formatSize(i.others[pid]))
	}
	fmt.Fprintf(&b, "Including non-PyTorch memory, this process has %s memory in use. ", formatSize(i.process))
	if i.allowed > 0 {
		fmt.Fprintf(&b, "%s allowed; ", formatSize(i.allowed))
	}
	fmt.Fprintf(&b, "Of the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but unallocated.",
		formatSize(i.allocated), formatSize(i.reserved-i.allocated))
	b.WriteString(" If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
	return b.String()
}

func hostOOMMessage(bytes uint64) string {
	return fmt.Sprintf("RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory: you tried to allocate %d bytes. Error code 12 (Cannot allocate memory)", bytes)
}

func shapeMessage(batch int) string {
	return fmt.Sprintf("RuntimeError: mat1 and mat2 shapes cannot be multiplied (%dx2048 and 1024x128)", 2*batch)
}

const (
	sizeLimitMessage = "RuntimeError: CUDA error: invalid configuration argument"
	initOOMMessage   = "RuntimeError: CUDA error: out of memory"
	noGPUMessage     = "RuntimeError: No CUDA GPUs are available"
)
