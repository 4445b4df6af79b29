package classify

import (
	"regexp"
	"strings"
)

// signature is one known error text. text is matched as a case-sensitive
// substring, because frameworks print these messages verbatim; re is used
// instead where a bare word would match too much (Python's "MemoryError" is
// a suffix of "torch.OutOfMemoryError", a shell's "Killed" is an ordinary
// English word). Both are matched within one line of output.
type signature struct {
	name    string
	outcome Outcome
	text    string
	re      *regexp.Regexp
	// lit is a substring of every match of re. Only lines that hold it are
	// tried against re, which keeps a scan of a large output fast.
	lit string
	// killed marks texts that only say "some process of the trial got
	// SIGKILL". That is host_oom only when the kernel confirms an OOM kill;
	// otherwise something else (a scheduler, a user) killed it: crash.
	killed bool
	// failedOnly marks OOM texts that libraries also print in warnings they
	// recover from, at sizes that fit: XLA's and TensorFlow's allocators
	// log CUDA_ERROR_OUT_OF_MEMORY while they shrink their first
	// allocation, XLA's autotuner logs CUDNN_STATUS_ALLOC_FAILED and
	// RESOURCE_EXHAUSTED for a candidate algorithm whose scratch space does
	// not fit and falls back to another (google-research/multinerf#2,
	// jax-ml/jax#788), and SGLang logs "multimem all-gather disabled (CUDA
	// driver error: out of memory)" and carries on. They explain a trial
	// that failed; they do not make a trial that exited 0 an OOM.
	failedOnly bool
	// Set by init: litBytes is what a line must hold for the entry to
	// match it (text, or lit), and anchored marks patterns that match only
	// at the start of a line.
	litBytes []byte
	anchored bool
}

// rankPrefix is what torchrun and DeepSpeed put before each line of a rank's
// output ("[rank0]: "), so line-anchored patterns allow it.
const rankPrefix = `(?:\[(?:rank|default)\d+\]:\s*)?`

// signatures is the one table of error texts, matched against the whole
// output of a trial (see Scanner). Order is priority: the first entry that
// matched anywhere in the output wins, and the reason shown is the last line
// it matched.
//   - Not-OOM look-alikes come first: after an illegal access the CUDA
//     context is broken and later calls can fail in any way, so an
//     "out of memory" next to it is a symptom, not the cause.
//   - TensorFlow's CPU-allocator OOM before its GPU OOM (same words).
//   - GPU memory before host memory: thrust reports a failed cudaMalloc as
//     "std::bad_alloc: cudaErrorMemoryAllocation: out of memory".
//   - Size limits after memory: they are the weakest evidence.
//   - Bare "was killed" texts last, and only with OOM-kill evidence.
//
// For a trial that failed, a known OOM text anywhere in the output counts:
// an OOM followed by the shutdown logs of other ranks, or caught by the
// program and printed before it exits, is common. A trial that exited 0
// with one of the GPU OOM texts (not failedOnly) in a line in an error's
// form (Scanner's errorForm: an exception's line, an ERROR log line, the
// allocator's message with its figures, a status line) ran out of memory
// and carried on, as trainers that skip a batch after an OOM do: it does
// not fit either. That includes torch.compile's max-autotune logging
// "Runtime error during autotuning: CUDA out of memory. Tried to allocate
// ... Ignoring this choice.": an allocation at that batch size did fail,
// as the adapter's OOM observer sees too. A line that only mentions the
// words does not make a trial that exited 0 an OOM (a config value, a note
// that an OOM may follow, a start-up tip: testdata/corpus/ok-exit0-*).
//
// The OOM tests of the batch-size finders that frameworks ship were read
// and are covered here, each in the corpus (testdata/corpus):
//   - PyTorch Lightning, is_oom_error (Lightning-AI/pytorch-lightning,
//     src/lightning/pytorch/utilities/memory.py): a RuntimeError whose
//     message holds both "CUDA" and "out of memory" (the "CUDA out of memory
//     (exception)" entry), "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." and
//     "DefaultCPUAllocator: can't allocate memory".
//   - HF Accelerate, should_reduce_batch_size (huggingface/accelerate,
//     src/accelerate/utils/memory.py): " out of memory." (its comment:
//     CUDA, HIP, XPU), the same cuDNN and CPU texts, and HPU's "FATAL
//     ERROR :: MODULE:PT_DEVMEM Allocation failed".
//   - MosaicML Composer, _is_cuda_oom (mosaicml/composer,
//     composer/trainer/trainer.py): "CUDA out of memory", "CUDA error: out
//     of memory", the cuDNN text, and its own "CUDA out of memory
//     encountered on a different rank" (composer/distributed/shared_utils.py)
//     and "CUDA out of memory or excessive memory allocation retries
//     detected. The train loop failed with an internal microbatch of size 1".
//   - DeepSpeed (deepspeedai/DeepSpeed): the autotuner counts any
//     experiment whose stderr holds "error" as failed
//     (deepspeed/autotuning/utils.py, search_error) and its micro-batch
//     search takes any failure as "too large" (autotuner.py); the compile
//     profiler tests 'out of memory' in a RuntimeError
//     (deepspeed/compile/profilers/comm_profile.py).
//
// Where batchfit deliberately differs:
//   - cuDNN's CUDNN_STATUS_NOT_SUPPORTED is size_limit, not oom, and the CPU
//     allocator's text is host_oom: all three mean "does not fit", reported
//     apart so the user sees which limit was hit.
//   - A bare "out of memory" (Accelerate's " out of memory.", DeepSpeed's
//     profiler) is not enough: the text must name the device or library
//     (CUDA, HIP, XPU, a PyTorch device allocator, NCCL, Triton, cuBLAS,
//     cuDNN, XLA, TensorFlow), because logs say "out of memory" in passing
//     (testdata/corpus/crash-memory-words-in-log.txt), and a crash taken
//     for "too large" gives a wrong answer silently, while an unknown OOM
//     text stops the search and is shown to the user. Lightning's test
//     reads the whole exception message; the entry that stands for it
//     reads the exception's line.
//   - DeepSpeed's "any failure is too large" is what batchfit refuses: an
//     unexplained failure is a crash and stops the search.
//   - Composer's auto-microbatching warning "CUDA out of memory or excessive
//     memory allocation retries detected. Train microbatch size will be
//     decreased" is not matched: Composer also prints it for allocator
//     thrashing without any OOM, and the run then goes on at the same
//     batch size in smaller microbatches (search with a fixed
//     device_train_microbatch_size). When it gives up at a microbatch of
//     1, the RuntimeError it raises is an OOM here too.
var signatures = []signature{
	// Not OOM, even though they mention memory or come from the same
	// libraries as OOM errors. The command is broken at this size or any.
	{name: "illegal memory access", outcome: Crash, text: "an illegal memory access was encountered"},
	{name: "illegal memory access", outcome: Crash, text: "CUDA_ERROR_ILLEGAL_ADDRESS"},
	{name: "device-side assert", outcome: Crash, text: "device-side assert triggered"},
	{name: "cuBLAS execution failed", outcome: Crash, text: "CUBLAS_STATUS_EXECUTION_FAILED"},
	{name: "cuDNN execution failed", outcome: Crash, text: "CUDNN_STATUS_EXECUTION_FAILED"},
	{name: "misaligned address", outcome: Crash, text: "CUDA error: misaligned address"},

	{name: "TensorFlow CPU allocator", outcome: HostOOM, lit: "OOM when allocating tensor", re: regexp.MustCompile(`OOM when allocating tensor .*/device:CPU:\d+ by allocator`)},

	// GPU memory.
	{name: "PyTorch CUDA out of memory", outcome: OOM, text: "CUDA out of memory."},
	{name: "PyTorch HIP out of memory", outcome: OOM, text: "HIP out of memory."},
	{name: "PyTorch XPU out of memory", outcome: OOM, text: "XPU out of memory."},
	{name: "PyTorch MPS out of memory", outcome: OOM, text: "MPS backend out of memory"},
	// The caching allocators of other PyTorch devices (torch_npu's "NPU
	// out of memory. Tried to allocate ...", MLU, MUSA) word it the same.
	{name: "PyTorch device out of memory", outcome: OOM, lit: " out of memory. Tried to allocate", re: regexp.MustCompile(`\b[A-Z]{2,5} out of memory\. Tried to allocate`)},
	{name: "torch.OutOfMemoryError", outcome: OOM, lit: "OutOfMemoryError", re: regexp.MustCompile(`(?m)^` + rankPrefix + `torch\.(?:cuda\.)?OutOfMemoryError\b`)},
	{name: "CUDA error: out of memory", outcome: OOM, text: "CUDA error: out of memory"},
	{name: "HIP error: out of memory", outcome: OOM, text: "HIP error: out of memory"},
	{name: "CUDA runtime out of memory", outcome: OOM, text: "cuda runtime error (2) : out of memory"},
	{name: "cudaErrorMemoryAllocation", outcome: OOM, text: "cudaErrorMemoryAllocation"},
	// PyTorch's checks of CUDA driver calls (C10_CUDA_DRIVER_CHECK).
	{name: "CUDA driver out of memory", outcome: OOM, failedOnly: true, text: "CUDA driver error: out of memory"},
	// torch.compile's Triton kernels: "RuntimeError: Triton Error [CUDA]:
	// out of memory", or Triton's own "Triton Error [CUDA] at file:line:".
	{name: "Triton out of memory", outcome: OOM, lit: "Triton Error [", re: regexp.MustCompile(`Triton Error \[(?:CUDA|HIP)\](?: at \S+:\d+)?: out of memory`)},
	// NCCL (a DDP trial): "ncclUnhandledCudaError: Call to CUDA function
	// failed. Last error: Cuda failure 'out of memory'", or with the
	// error's number in NCCL's own WARN line ("Cuda failure 2 'out of
	// memory'").
	{name: "NCCL CUDA out of memory", outcome: OOM, lit: "'out of memory'", re: regexp.MustCompile(`Cuda failure (?:\d+ )?'out of memory'`)},
	{name: "CUDA driver out of memory", outcome: OOM, failedOnly: true, text: "CUDA_ERROR_OUT_OF_MEMORY"},
	{name: "cuBLAS allocation failed", outcome: OOM, text: "CUBLAS_STATUS_ALLOC_FAILED"},
	{name: "cuDNN allocation failed", outcome: OOM, failedOnly: true, text: "CUDNN_STATUS_ALLOC_FAILED"},
	// Habana Gaudi (HPU), as Accelerate tests for it.
	{name: "HPU allocation failed", outcome: OOM, text: "MODULE:PT_DEVMEM Allocation failed"},
	{name: "XLA out of memory", outcome: OOM, failedOnly: true, text: "RESOURCE_EXHAUSTED: Out of memory"},
	{name: "XLA out of memory", outcome: OOM, failedOnly: true, text: "Resource exhausted: Out of memory"},
	{name: "XLA out of memory", outcome: OOM, failedOnly: true, text: "RESOURCE_EXHAUSTED: Failed to allocate request"},
	{name: "XLA out of memory", outcome: OOM, failedOnly: true, text: "Ran out of memory in memory space hbm"},
	{name: "TensorFlow OOM", outcome: OOM, text: "OOM when allocating tensor"},
	{name: "TensorFlow ResourceExhaustedError", outcome: OOM, text: "ResourceExhaustedError"},
	// Lightning's test, for what the entries above do not name: an
	// exception whose message says both "CUDA" and "out of memory"
	// (Composer's "RuntimeError: CUDA out of memory encountered on a
	// different rank", its microbatch-of-1 failure).
	{name: "CUDA out of memory (exception)", outcome: OOM, lit: "out of memory", re: regexp.MustCompile(`(?m)^` + rankPrefix + `[\w.]*(?:Error|Exception): .*(?:CUDA.*out of memory|out of memory.*CUDA)`)},

	// Host (CPU) memory: the process reports that an allocation failed, or
	// Slurm reports an OOM kill in the job's cgroup.
	{name: "Slurm oom_kill event", outcome: HostOOM, lit: "kill event", re: regexp.MustCompile(`oom[-_]kill event`)},
	{name: "PyTorch CPU allocator", outcome: HostOOM, text: "DefaultCPUAllocator: can't allocate memory"},
	{name: "PyTorch CPU allocator", outcome: HostOOM, text: "DefaultCPUAllocator: not enough memory"},
	{name: "NumPy MemoryError", outcome: HostOOM, text: "_ArrayMemoryError: Unable to allocate"},
	{name: "Python MemoryError", outcome: HostOOM, lit: "MemoryError", re: regexp.MustCompile(`(?m)^` + rankPrefix + `MemoryError\b`)},
	{name: "std::bad_alloc", outcome: HostOOM, text: "std::bad_alloc"},

	// Too large for a reason other than memory: 32-bit index limits and
	// kernel launch limits that only large inputs reach.
	{name: "32-bit index math", outcome: SizeLimit, text: "canUse32BitIndexMath"},
	{name: "32-bit index math", outcome: SizeLimit, text: "must fit into 32-bit index math"},
	{name: "int32 element count", outcome: SizeLimit, text: "numel needs to be smaller than int32_t max"},
	{name: "int32 element count", outcome: SizeLimit, text: "Number of elements was larger than representable by 32-bit"},
	// c10's element count of a tensor whose sizes multiply past int64.
	{name: "numel overflow", outcome: SizeLimit, text: "numel: integer multiplication overflow"},
	{name: "invalid launch configuration", outcome: SizeLimit, text: "invalid configuration argument"},
	// cuDNN says NOT_SUPPORTED for tensors past its element limits (2^31
	// elements at a large batch), and PyTorch adds a misleading hint about
	// non-contiguous input. A genuinely unsupported layout fails at every
	// size, which the search then reports as "nothing fits", with this text.
	{name: "cuDNN not supported (size)", outcome: SizeLimit, text: "CUDNN_STATUS_NOT_SUPPORTED"},

	// Some process of the trial was SIGKILLed; host_oom only with evidence.
	{name: "DataLoader worker killed", outcome: HostOOM, killed: true, text: "is killed by signal: Killed"},
	{name: "torchrun child got SIGKILL", outcome: HostOOM, killed: true, text: "Signal 9 (SIGKILL) received by PID"},
	{name: "shell: Killed", outcome: HostOOM, killed: true, lit: "Killed", re: regexp.MustCompile(`(?m)^(?:Killed|.*: line \d+: +\d+ Killed\b.*)$`)},
}

func init() {
	for i := range signatures {
		s := &signatures[i]
		s.litBytes = []byte(s.text)
		if s.re != nil {
			s.litBytes = []byte(s.lit)
			s.anchored = strings.HasPrefix(s.re.String(), "(?m)^")
		}
	}
}
