package worker

import (
	"path/filepath"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// The SimCLR example Trial runs in the worker on the CPU (small images) and
// its reset verifies: the warm-up made AdamW's state, nothing else stays.
func TestExampleSimCLRTrial(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	if !hasModule(py, "torchvision") {
		t.Skip("the SimCLR example needs torchvision (apt-get install python3-torchvision)")
	}
	target, _ := filepath.Abs("../../examples/worker/simclr_trial.py")
	// At 32x32 ResNet-50's last stage is 1x1, and BatchNorm cannot train on
	// a single value per channel: the warm-up needs two samples.
	w := startTorch(t, target+":Trial", "SIMCLR_DEVICE=cpu", "SIMCLR_IMAGE_SIZE=32", WarmupEnv+"=2")
	if h := w.Hello(); h.Optimizers != 1 || h.OptimizerStateBytes == 0 || h.WarmupSize != 2 {
		t.Errorf("hello = %+v", h)
	}
	res := runTrial(t, w, 4, 1)
	if res.Outcome != classify.OK || !res.Verified || res.OptimizerStateCreated {
		t.Errorf("trial = %+v", res)
	}
}
