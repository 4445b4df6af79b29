package worker

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batchfit/batchfit/internal/adapter"
)

// ProtocolVersion is the version of the worker protocol this package speaks
// (python/batchfit/_runtime/worker.py states it in its hello).
const ProtocolVersion = 1

// FDsEnv names the worker's channel: "r,w", the descriptors it reads
// requests from and writes replies to.
const FDsEnv = "BATCHFIT_WORKER_FDS"

// WarmupEnv is the batch size of the worker's warm-up steps (default 1; 0
// skips the warm-up).
const WarmupEnv = "BATCHFIT_WORKER_WARMUP"

// Hello is the worker's first message: what it runs on, and the memory
// baseline every reset must return to.
type Hello struct {
	Version     int    `json:"version"`
	PID         int    `json:"pid"`
	Python      string `json:"python,omitempty"`
	Target      string `json:"target,omitempty"`
	Torch       string `json:"torch,omitempty"`
	CUDA        bool   `json:"cuda"`
	Device      string `json:"device"`
	DeviceTotal uint64 `json:"device_total,omitempty"`
	// Verify names how resets are verified: "cuda_allocated" (torch's
	// allocator counter must return to BaselineAllocated exactly) or
	// "python_tensors" (without CUDA: the bytes of all tensors Python can
	// reach must return to BaselineTensorBytes).
	Verify              string `json:"verify"`
	BaselineAllocated   uint64 `json:"baseline_allocated"`
	BaselineReserved    uint64 `json:"baseline_reserved"`
	BaselineTensorBytes uint64 `json:"baseline_tensor_bytes"`
	WarmupSize          int    `json:"warmup_size"`
	WarmupSteps         int    `json:"warmup_steps"`
	Optimizers          int    `json:"optimizers"`
	OptimizerStateBytes uint64 `json:"optimizer_state_bytes"`
	// Packages are the third-party top-level packages the worker imported
	// (the trial's module and what it imports): what a fork server must
	// preload for the same trial's fresh processes.
	Packages     []string `json:"packages,omitempty"`
	SetupSeconds float64  `json:"setup_seconds"`
}

// Tensor describes a tensor that was still alive after a reset.
type Tensor struct {
	Shape  []int  `json:"shape"`
	DType  string `json:"dtype"`
	Device string `json:"device"`
	Bytes  uint64 `json:"bytes"`
}

// reply is a result message as it comes over the wire.
type reply struct {
	Type                  string    `json:"type"`
	ID                    int       `json:"id"`
	Outcome               string    `json:"outcome"`
	Exception             string    `json:"exception"`
	Traceback             string    `json:"traceback"`
	PeakAllocated         uint64    `json:"peak_allocated"`
	PeakReserved          uint64    `json:"peak_reserved"`
	StepSeconds           []float64 `json:"step_seconds"`
	RetainedBytes         int64     `json:"retained_bytes"`
	AllocatedAfter        uint64    `json:"allocated_after"`
	ReservedAfter         uint64    `json:"reserved_after"`
	Verified              *bool     `json:"verified"`
	ResetError            string    `json:"reset_error"`
	OptimizerStateCreated bool      `json:"optimizer_state_created"`
	OptimizerStateBytes   uint64    `json:"optimizer_state_bytes"`
	RetainedTensors       []Tensor  `json:"retained_tensors"`
	// OOMRequest is the allocation torch's OOM observer saw refused in an
	// out-of-memory trial, with the allocator's counters then.
	OOMRequest *adapter.OOMRequest `json:"oom_request"`
}

// fatal is the worker's last word when it cannot start.
type fatal struct {
	Stage     string `json:"stage"`
	Outcome   string `json:"outcome"`
	Exception string `json:"exception"`
	Traceback string `json:"traceback"`
}

// envelope is what every message has.
type envelope struct {
	Type  string          `json:"type"`
	ID    json.RawMessage `json:"id"`
	Error string          `json:"error"`
}

// message is one line from the worker, decoded as far as its type says.
type message struct {
	typ   string
	hello *Hello
	reply *reply
	fatal *fatal
	err   string // an "error" message's text
	line  []byte
}

var errEmptyType = errors.New("no message type")

// parseMessage decodes one line. An error means the line is not a message
// of this protocol at all.
func parseMessage(line []byte) (message, error) {
	m := message{line: line}
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return m, fmt.Errorf("not a JSON object: %w", err)
	}
	m.typ = env.Type
	switch env.Type {
	case "hello":
		m.hello = &Hello{}
		if err := json.Unmarshal(line, m.hello); err != nil {
			return m, fmt.Errorf("hello: %w", err)
		}
	case "result":
		m.reply = &reply{}
		if err := json.Unmarshal(line, m.reply); err != nil {
			return m, fmt.Errorf("result: %w", err)
		}
		switch m.reply.Outcome {
		case "ok", "oom", "error":
		default:
			return m, fmt.Errorf("result: unknown outcome %q", m.reply.Outcome)
		}
		if m.reply.Verified == nil {
			return m, errors.New("result: no verified field")
		}
	case "fatal":
		m.fatal = &fatal{}
		if err := json.Unmarshal(line, m.fatal); err != nil {
			return m, fmt.Errorf("fatal: %w", err)
		}
	case "error":
		m.err = env.Error
	case "":
		return m, errEmptyType
	}
	return m, nil
}

// request is a message to the worker.
type request struct {
	Type      string `json:"type"`
	ID        int    `json:"id,omitempty"`
	BatchSize int    `json:"batch_size,omitempty"`
	Steps     int    `json:"steps,omitempty"`
}
