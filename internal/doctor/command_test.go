package doctor

import (
	"context"
	"errors"
	"testing"
)

// ErrInterrupted must match context.Canceled: the CLI's exit code for
// Ctrl-C (130) comes from that.
func TestErrInterruptedIsCanceled(t *testing.T) {
	if !errors.Is(ErrInterrupted, context.Canceled) {
		t.Errorf("%v does not match context.Canceled", ErrInterrupted)
	}
}
