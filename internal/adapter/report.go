// Package adapter is the Go side of the Python adapter: it places the
// embedded Python package on a trial's PYTHONPATH, reads the reports the
// adapter writes to the private channel named by BATCHFIT_REPORT, and knows
// each framework (Framework: torch, JAX, TensorFlow).
package adapter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// ReportEnv names the file, in the trial's environment, that the adapter
// appends its events to. It is private: stdout belongs to the user's program.
const ReportEnv = "BATCHFIT_REPORT"

// CPUThreadsEnv, set in the environment of trials that run at the same
// time as others, is how many CPU threads each may use: the adapter sets
// OMP_NUM_THREADS from it before torch loads, or torch.set_num_threads once
// it has (a forked trial). Two trials that each start a thread per CPU
// oversubscribe the machine and each run about twice as long as one alone;
// with the threads split, each runs as fast as one alone
// (bench/probes/shared_threads.py and its result).
const CPUThreadsEnv = "BATCHFIT_CPU_THREADS"

// SoakEnv, set to 1 in a --soak trial's environment, makes the adapter
// answer batchfit's SIGTERM at the soak's end by writing its report and
// leaving, so that the soak's per-step peaks are not lost.
const SoakEnv = "BATCHFIT_SOAK"

// Event is one JSON line of the report file. Every process that loads the
// adapter (each torchrun rank, say) appends its own "exit" event, so a
// trial's report can hold several.
type Event struct {
	Version int    `json:"version"`
	Event   string `json:"event"` // "exit" (at interpreter exit); others may follow
	PID     int    `json:"pid"`
	Rank    int    `json:"rank,omitempty"` // from RANK/LOCAL_RANK when set

	Torch           string `json:"torch,omitempty"`            // torch.__version__
	CUDAInitialized bool   `json:"cuda_initialized,omitempty"` // torch.cuda.is_initialized()
	Device          string `json:"device,omitempty"`           // torch.cuda.get_device_name()
	DeviceIndex     int    `json:"device_index,omitempty"`
	DeviceTotal     uint64 `json:"device_total,omitempty"` // bytes

	// MaxAllocated is the framework's own peak in bytes: torch's
	// max_memory_allocated, or the largest device peak of JAX or TensorFlow.
	MaxAllocated uint64 `json:"max_memory_allocated,omitempty"`
	MaxReserved  uint64 `json:"max_memory_reserved,omitempty"` // bytes (torch)
	// MemoryFraction is the share of the device torch's allocator was
	// capped at (get_per_process_memory_fraction; 1 when uncapped), 0 when
	// unknown.
	MemoryFraction float64 `json:"memory_fraction,omitempty"`

	// Framework names whose memory figures the event holds: "torch" (when
	// it used CUDA), else "jax" or "tensorflow"; empty when none reported.
	Framework string `json:"framework,omitempty"`
	// Devices are JAX's or TensorFlow's figures for each local device.
	Devices []DeviceMemory `json:"devices,omitempty"`
	// MemoryLimit is the framework's own pool limit in bytes, the largest
	// over devices: JAX's bytes_limit (75 % of the card by default, or the
	// XLA memory fraction), TensorFlow's logical device limit.
	MemoryLimit uint64 `json:"memory_limit,omitempty"`

	// OOM is set when a GPU out-of-memory error (torch, JAX or TensorFlow)
	// ended the program.
	OOM bool `json:"oom,omitempty"`
	// Exception is "Type: message" (first line) of the exception that ended
	// the program, if any.
	Exception string `json:"exception,omitempty"`
	// OOMsCaught counts GPU out-of-memory errors that reached Python and
	// that the program survived (it caught them), not counting the one that
	// ended it.
	OOMsCaught int `json:"ooms_caught,omitempty"`
	// OOMRequests are the allocations refused, the first ones of the
	// process: torch's allocator observer reports every one (those torch
	// recovered from by itself too); for JAX and TensorFlow, those named by
	// the errors counted.
	OOMRequests []OOMRequest `json:"oom_requests,omitempty"`

	// Steps counts the optimizer steps the adapter observed (those of the
	// first optimizer that stepped), so a run of one step is told from a run
	// of none.
	Steps int `json:"steps,omitempty"`
	// StepTimes are seconds between consecutive optimizer steps (one fewer
	// than Steps), when the adapter could observe them (torch's global
	// optimizer step hook; before torch 2.0, a wrapper of Optimizer.step).
	StepTimes []float64 `json:"step_times,omitempty"`
	// StepPeaks are the framework's peak memory in bytes after each step
	// (torch: max_memory_allocated, when CUDA is initialized; JAX: the
	// largest peak_bytes_in_use of the local devices), so that memory still
	// rising at the last step can be seen.
	StepPeaks []uint64 `json:"step_peaks,omitempty"`
	// Stopped is set when the adapter ended the program after BATCHFIT_STEPS
	// steps (it then exits with status 0); Steps says how many.
	Stopped bool `json:"stopped,omitempty"`
	// SizeRead is set when the program took its batch size from
	// batchfit.batch_size(), which returns the trial's: the size reaches
	// the program as surely as through {} in its arguments.
	SizeRead bool `json:"size_read,omitempty"`
	// GateWait is how long, in seconds, a trial started early waited at
	// its gate before it touched the GPU (trial.Gate); 0 when it had none.
	GateWait float64 `json:"gate_wait,omitempty"`
	// Plan is the largest memory plan of a JAX step that XLA compiled
	// (XLAPlan); PlanStopped says the adapter ended the program because
	// that plan could not fit in the pool, before the step ran.
	Plan        *XLAPlan `json:"plan,omitempty"`
	PlanStopped bool     `json:"plan_stopped,omitempty"`

	// Sources are the source files the process loaded outside the standard
	// library, site-packages and dist-packages (its script first, then by
	// path), at most MaxSources; SourcesTruncated says there were more.
	Sources          []Source `json:"sources,omitempty"`
	SourcesTruncated bool     `json:"sources_truncated,omitempty"`
	// Opened are the files the process opened for reading outside the
	// standard library, site-packages, dist-packages, batchfit's own
	// files, /dev, /proc and /sys, less its Sources: a config file it opens
	// at a fixed path. Only the first MaxOpened regular files of at most
	// 1 MiB each are reported, so the data a program streams is left out.
	Opened []Source `json:"opened,omitempty"`
	// Packages are the top-level packages the process imported from
	// site-packages or dist-packages, in import order: what a fork server
	// may preload (internal/forkserver).
	Packages []string `json:"packages,omitempty"`

	// Batches are the shapes of the batches the training steps consumed,
	// and whether the trial ran the loader's largest batches first; nil
	// when the adapter saw no batch.
	Batches *Batches `json:"batches,omitempty"`
}

// WorstCaseEnv, set in every trial's environment, is "1" to have the
// adapter run the loader's largest batches first (the default when unset),
// "0" for --worst-case off: the batches come in the program's own order,
// and a trial whose shapes vary stops at BATCHFIT_STEPS all the same.
const WorstCaseEnv = "BATCHFIT_WORST_CASE"

// Batches is what the adapter saw of a trial's batch shapes, as
// batchfit/_runtime/report.py writes them. Shapes that vary between batches (NLP
// with dynamic padding, speech, detection) make a few steps' peak the
// peak of those steps' batches only, so a trial either runs the largest
// batches first (WorstFirst) or runs on until the largest shape stops
// growing (ExtendedSteps, Bound), and says which.
type Batches struct {
	// Source is where the shapes were read: "dataloader", "forward" or
	// "jit".
	Source string `json:"source"`
	// Shapes are the batch each counted step consumed (element i is step
	// i+1's, aligned with Event.StepPeaks), at most 1000 of them.
	Shapes []BatchShape `json:"shapes"`
	// Largest is the largest batch by total elements: the loader's
	// largest when WorstFirst, else the largest seen.
	Largest BatchShape `json:"largest"`
	// Varied says shapes differed between batches, seen or planned.
	Varied bool `json:"varied"`
	// WorstFirst says the trial's first WorstSteps steps were the
	// loader's largest batches.
	WorstFirst bool `json:"worst_first"`
	WorstSteps int  `json:"worst_steps"`
	// WhyNot, set when Varied and not WorstFirst, says why the largest
	// batches could not run first: "off" for --worst-case off, "iterable
	// dataset", "no DataLoader", "scan timed out after 20 s", ...
	WhyNot string `json:"why_not"`
	// ScanSeconds is the loader scan's time, ScannedBatches the batches
	// it looked at.
	ScanSeconds    float64 `json:"scan_seconds"`
	ScannedBatches int     `json:"scanned_batches"`
	// ExtendedSteps are the steps run past BATCHFIT_STEPS because shapes
	// still grew; GrewAtStep is the last step at which the largest shape
	// grew; Bound is what ended an extended trial: "steps" (patience),
	// "time" or "end" (the program's own).
	ExtendedSteps int    `json:"extended_steps"`
	GrewAtStep    int    `json:"grew_at_step"`
	Bound         string `json:"bound"`
}

// BatchShape is one batch's tensor shapes by their path into the batch
// ("input_ids", "1.boxes", "arg0"), at most 16 tensors.
type BatchShape map[string][]int

// MaxSources bounds Event.Sources and Summary.Sources. The adapter only
// stats them (hashing is the Go side's), so the bound keeps the exit event
// small, not the adapter's time.
const MaxSources = 1000

// MaxOpened bounds Event.Opened, Summary.Opened and what a search keeps of
// them: beyond it, a program's files are taken for the data it streams,
// which are not checked (and so leave a cached answer usable).
const MaxOpened = 100

// Source is one file a program loaded or opened, as it was when it exited.
type Source struct {
	Path    string `json:"path"` // absolute
	Size    int64  `json:"size"`
	MTimeNS int64  `json:"mtime_ns"`
}

// DeviceMemory is a framework's own memory figures for one local device, in
// bytes; zero is unknown.
type DeviceMemory struct {
	Index int    `json:"index"`                 // among the process's local devices
	Peak  uint64 `json:"peak_bytes,omitempty"`  // JAX peak_bytes_in_use; TensorFlow get_memory_info peak
	Limit uint64 `json:"limit_bytes,omitempty"` // JAX bytes_limit; TensorFlow logical device limit
	Pool  uint64 `json:"pool_bytes,omitempty"`  // JAX pool_bytes: what its allocator holds
}

// OOMRequest is one allocation a framework refused.
type OOMRequest struct {
	Device int    `json:"device"`
	Bytes  uint64 `json:"bytes,omitempty"` // asked for
	// Limit is what torch's allocator may use on the device (the per-process
	// fraction's cap, else the device's total), as its OOM observer reports
	// it; Free is the device's free memory then (torch only).
	Limit uint64 `json:"limit,omitempty"`
	Free  uint64 `json:"free,omitempty"`
	// Allocated and Reserved are the allocator's counters when it refused,
	// to the byte (torch only).
	Allocated uint64 `json:"allocated,omitempty"`
	Reserved  uint64 `json:"reserved,omitempty"`
}

// XLAPlan is what XLA's compile says a JAX step will need, read from the
// compiled step's memory analysis before its first call with new shapes
// (python/batchfit/_runtime/jax_plan.py), in bytes, on the device with the
// least free memory: its arguments, outputs, the outputs that reuse a
// donated argument's buffer (Alias), its one temporary buffer, and Need, what
// it allocates beyond the arguments (Outputs - Alias + Temp). InUse, Limit
// and Free are the pool's figures as the step was about to run.
type XLAPlan struct {
	Arguments uint64 `json:"arguments"`
	Outputs   uint64 `json:"outputs"`
	Alias     uint64 `json:"alias"`
	Temp      uint64 `json:"temp"`
	Need      uint64 `json:"need"`
	InUse     uint64 `json:"in_use"`
	Limit     uint64 `json:"limit"`
	Free      uint64 `json:"free"`
	// Stopped says the trial ended on this plan before the step ran: its
	// Need exceeded Free by more than the adapter's slack (0.5 % of Limit).
	Stopped bool `json:"stopped"`
}

// Append writes ev as one JSON line to the report file at path. Each event is
// one write on an O_APPEND file so that events from concurrent processes do
// not interleave.
func Append(path string, ev Event) error {
	if ev.Version == 0 {
		ev.Version = 1
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode report event: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open report: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write report: %w", werr)
	}
	return cerr
}

// Read parses every event in the report file. A missing file is no events.
// Lines that are not valid events are skipped and counted in bad, so a
// caller can warn and fall back to the trial's exit status and output. An
// event of the adapter's that is cut short (a write that failed part way,
// on a full disk) is a bad line too, and err is then a *ReportError
// wrapping ErrCutShort, with the events that were read: a lost event may
// have been the one that said the program ran out of memory.
func Read(path string) (events []Event, bad int, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open report: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var ev Event
		if json.Unmarshal(line, &ev) != nil || ev.Version < 1 || ev.Event == "" {
			bad++
			if cutShort(line) {
				err = &ReportError{Path: path, Err: ErrCutShort}
			}
			continue
		}
		events = append(events, ev)
	}
	if sc.Err() != nil {
		bad++
	}
	return events, bad, err
}

// eventStart is how every event the adapter writes begins: the version is
// the first key of the hook's exit_event (batchfit/_runtime/report.py) and
// of Event as Append encodes it.
var eventStart = []byte(`{"version":`)

// cutShort says a bad line is the start of an event that was never
// written whole: it begins as an event does and is not JSON. A partial
// event that another process's event follows on the same line is such a
// line too.
func cutShort(line []byte) bool {
	return bytes.HasPrefix(line, eventStart) && !json.Valid(line)
}

// ErrCutShort is a report whose last event the adapter did not write whole.
var ErrCutShort = errors.New("an event is cut short")

// ReportError is an adapter report that a trial could not write whole: the
// adapter said so on the trial's stderr (ParseReportFailure), or an event
// is cut short (Read). Without the report a trial is judged by its exit
// status and output alone, which do not show an OOM the program caught.
type ReportError struct {
	Path string // the report file
	Err  error  // what the adapter's write met (syscall.ENOSPC, say), or ErrCutShort
}

func (e *ReportError) Error() string { return fmt.Sprintf("write trial report %s: %v", e.Path, e.Err) }
func (e *ReportError) Unwrap() error { return e.Err }

// ReportFailedPrefix begins the line the adapter writes on the trial's
// stderr when it cannot write its report:
//
//	batchfit adapter: report not written: No space left on device (errno 28): /logs/trial-003-b128.report.jsonl
//
// stderr reaches batchfit whatever the disk the report is on (it is a
// pipe: internal/trial). batchfit/_runtime/report.py writes the same words.
const ReportFailedPrefix = "batchfit adapter: report not written: "

var reportFailedLine = regexp.MustCompile(`^` + regexp.QuoteMeta(ReportFailedPrefix) + `.*\(errno (\d+)\): (.+)$`)

// ParseReportFailure reads a line that begins with ReportFailedPrefix: the
// report it names and the error (a syscall.Errno) the adapter met. ok is
// false when the line is not one.
func ParseReportFailure(line string) (e *ReportError, ok bool) {
	m := reportFailedLine.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
	if m == nil {
		return nil, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return nil, false
	}
	return &ReportError{Path: m[2], Err: syscall.Errno(n)}, true
}
