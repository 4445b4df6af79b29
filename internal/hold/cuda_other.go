//go:build !cgo || !linux

package hold

import (
	"fmt"

	"github.com/batchfit/batchfit/internal/gpu"
)

// CUDA holds nothing in a build without cgo: the driver API is loaded
// through cgo on Linux only.
type CUDA struct{}

// Hold reports ErrUnavailable.
func (CUDA) Hold(gpu.Device, uint64) (Hold, error) {
	return nil, fmt.Errorf("%w: built without cgo", ErrUnavailable)
}
