package probe

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hold"
)

// SetHeld runs the trials from now on on a held card, or no longer: each
// trial runs alone on its GPUs, in a plain fresh process (no fork server),
// while batchfit holds all but MemoryLimit of each of them (Config.Holder).
// The trial then has exactly the named card's memory for all it does, as
// on that card: no allocator cap, the user's environment, and XLA's pool
// as the card gives it (poolEnv); the card's memory is the only limit.
func (p *Prober) SetHeld(on bool) {
	p.mu.Lock()
	p.held = on
	p.mu.Unlock()
	if p.cfg.Sampler != nil && on {
		p.cfg.Sampler.SetHolder(os.Getpid())
	}
}

// Holding says the trials run on a held card (SetHeld): a warm worker's
// prober, whose fresh trials run here, stops its standby worker first, so
// that nothing else of the search's is on the GPU.
func (p *Prober) Holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// CanHold says whether trials can run on a held card here: there is a
// limit to hold the GPUs to, a Holder, and a hold of the first GPU
// succeeds. The error says why not (hold.ErrUnavailable, a *hold.ShortError).
func (p *Prober) CanHold() error {
	if p.cfg.MemoryLimit == 0 || p.cfg.Holder == nil || len(p.cfg.Devices) == 0 {
		return hold.ErrUnavailable
	}
	release, err := p.holdFor(nil)
	if err != nil {
		return err
	}
	release()
	return nil
}

// alone is slots with each GPU set once: trials on a held card each have
// their GPUs to themselves.
func alone(slots [][]int) [][]int {
	var out [][]int
	for _, s := range slots {
		if !slices.ContainsFunc(out, func(o []int) bool { return slices.Equal(o, s) }) {
			out = append(out, s)
		}
	}
	return out
}

// HoldError says the memory a held trial needs held could not be: the
// CUDA driver refused, or less than the card was free.
type HoldError struct {
	GPU int
	Err error
}

func (e *HoldError) Error() string {
	return fmt.Sprintf("hold all but the limit of gpu %d: %v", e.GPU, e.Err)
}

func (e *HoldError) Unwrap() error { return e.Err }

// holdFor holds each of gpus (every device when nil) down to the limit and
// returns what gives them back.
func (p *Prober) holdFor(gpus []int) (release func(), err error) {
	var holds []hold.Hold
	release = func() {
		for _, h := range holds {
			if err := h.Release(); err != nil {
				p.warn("giving back the memory held for a trial: " + err.Error())
			}
		}
	}
	for _, d := range p.heldDevices(gpus) {
		h, err := p.cfg.Holder.Hold(d, p.cfg.MemoryLimit)
		if err != nil {
			release()
			return nil, &HoldError{GPU: d.Index, Err: err}
		}
		holds = append(holds, h)
	}
	if len(holds) == 0 {
		return nil, errors.New("hold GPU memory: no GPU to hold")
	}
	return release, nil
}

// heldDevices are the devices of gpus, by NVML index; every device when
// gpus is nil.
func (p *Prober) heldDevices(gpus []int) []gpu.Device {
	if gpus == nil {
		return p.cfg.Devices
	}
	var out []gpu.Device
	for _, d := range p.cfg.Devices {
		if slices.Contains(gpus, d.Index) {
			out = append(out, d)
		}
	}
	return out
}
