package classify

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
)

// size is how PyTorch's format_size prints bytes: "0 bytes", "512.00 KiB",
// "20.00 MiB", "7.79 GiB".
const size = `(\d+(?:\.\d+)?) (bytes|KiB|MiB|GiB|TiB)`

var (
	oomTried = regexp.MustCompile(`Tried to allocate ` + size)
	// PyTorch 2.0 and 2.1 printed "total capacty" (sic).
	oomCapacity    = regexp.MustCompile(`total capac(?:i)?ty of ` + size)
	oomCapacityOld = regexp.MustCompile(size + ` total capacity`)
	oomFree        = regexp.MustCompile(`of which ` + size + ` is free`)
	oomFreeOld     = regexp.MustCompile(size + ` free[;)]`)
)

// ParseTorchOOM reads the last PyTorch CUDA/HIP out-of-memory message in
// output and returns the size of the allocation that failed, the device's
// total memory and its free memory, in bytes. It knows both forms:
//
//	CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; 6.64 GiB already allocated; 21.00 MiB free; ...)
//	CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB is free. ...
//
// The numbers are rounded as PyTorch printed them (two decimals). ok is
// false unless all three were found. Capacity is the device's, even when
// per_process_memory_fraction capped the process lower ("... allowed;").
func ParseTorchOOM(output []byte) (tried, capacity, free uint64, ok bool) {
	i := bytes.LastIndex(output, []byte("out of memory. Tried to allocate"))
	if i < 0 {
		return 0, 0, 0, false
	}
	line := lineAt(output, i)
	tried, ok1 := parseSize(line, oomTried)
	capacity, ok2 := parseSize(line, oomCapacity, oomCapacityOld)
	free, ok3 := parseSize(line, oomFree, oomFreeOld)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, 0, false
	}
	return tried, capacity, free, true
}

// parseSize reads the size the first of res that matches b captured (its
// two groups: a number and a unit); the others are older wordings.
func parseSize(b []byte, res ...*regexp.Regexp) (uint64, bool) {
	var m [][]byte
	for _, re := range res {
		if m = re.FindSubmatch(b); m != nil {
			break
		}
	}
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, false
	}
	unit := map[string]float64{"": 1, "B": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[string(m[2])]
	return uint64(math.Round(v * unit)), true
}
