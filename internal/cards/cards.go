// Package cards knows GPU models by name and the memory their driver
// reports, so that --memory-limit can emulate a card the user names ("will
// this fit on an L4?") rather than a size they have to look up.
package cards

import (
	"slices"
	"strings"
)

// Card is one GPU model as the NVIDIA driver reports it.
type Card struct {
	Name       string   // the canonical --memory-limit name, e.g. "a100-40gb"
	Model      string   // as NVML names it
	Aliases    []string // other names it is known by
	MiB        uint64   // total memory as nvidia-smi and NVML report it (R510+ drivers)
	Source     string   // a public nvidia-smi output showing it
	CUDAMiB    uint64   // total memory a CUDA process sees (cudaMemGetInfo), 0 when unknown
	CUDASource string   // where CUDAMiB comes from
	Note       string   // variants, ECC
}

// Bytes is the card's total memory in bytes.
func (c Card) Bytes() uint64 { return c.MiB << 20 }

// Usable is the memory a CUDA process on the card sees in bytes: NVML's
// total less the driver's reservation. Where that is not known it is the
// card's total, which is more than a process can have.
func (c Card) Usable() uint64 {
	if c.CUDAMiB == 0 {
		return c.Bytes()
	}
	return c.CUDAMiB << 20
}

// Known are the cards --memory-limit accepts by name. MiB is the total that
// nvidia-smi's memory.total and NVML's nvmlDeviceGetMemoryInfo report on
// R510 and later drivers, with ECC as the card ships (on for data-centre
// cards; GDDR cards lose 1/16 with ECC on). Older drivers reported a little
// less (T4 15109, A100-40GB 40536, A100-80GB 81252), and CUDA's own total
// is less again (the driver's reservation). The emulation holds the whole
// process to CUDA's total where it is known (Usable), as the real card
// does, else to this figure, which a real card would at most allow.
//
// CUDAMiB is CUDA's total as PyTorch's out-of-memory message prints it ("GPU
// 0 has a total capacity of 14.56 GiB"), times 1024 to the nearest MiB. The
// message gives two decimals of a GiB, so the figure is rounded to about
// 10 MiB; the reservation also moves a little between driver releases. The
// H200's is measured to the byte (cudaMemGetInfo's total) and rounded down.
// A card with no message that names it keeps CUDAMiB 0.
var Known = []Card{
	{Name: "t4", Model: "Tesla T4", MiB: 15360, Source: "https://github.com/modal-labs/modal-client/pull/2797", CUDAMiB: 14909, CUDASource: "https://github.com/Zheng-Chong/CatVTON/issues/133", Note: "16 GB GDDR6, ECC on"},
	{Name: "l4", Model: "NVIDIA L4", MiB: 23034, Source: "https://github.com/speaches-ai/speaches/pull/438", CUDAMiB: 22559, CUDASource: "https://github.com/ArcInstitute/evo2/issues/190", Note: "24 GB GDDR6, ECC on"},
	{Name: "a10g", Model: "NVIDIA A10G", MiB: 23028, Source: "https://github.com/NVIDIA/DCGM/issues/232", Note: "AWS g5, 24 GB GDDR6, ECC on"},
	{Name: "a10", Model: "NVIDIA A10", MiB: 23028, Source: "https://github.com/mayooot/detect-gpu/issues/3", CUDAMiB: 22518, CUDASource: "https://github.com/zai-org/CogVLM/issues/236", Note: "24 GB GDDR6, ECC on"},
	{Name: "rtx3090", Model: "NVIDIA GeForce RTX 3090", Aliases: []string{"3090"}, MiB: 24576, Source: "https://github.com/noonghunna/club-3090/issues/390", CUDAMiB: 24248, CUDASource: "https://github.com/vllm-project/vllm/issues/16343"},
	{Name: "rtx4090", Model: "NVIDIA GeForce RTX 4090", Aliases: []string{"4090"}, MiB: 24564, Source: "https://github.com/vllm-project/vllm/issues/7553", CUDAMiB: 24207, CUDASource: "https://github.com/TMElyralab/MuseTalk/issues/76"},
	{Name: "rtx5090", Model: "NVIDIA GeForce RTX 5090", Aliases: []string{"5090"}, MiB: 32607, Source: "https://github.com/noonghunna/club-3090/issues/741", CUDAMiB: 32113, CUDASource: "https://github.com/TrajectoryCrafter/TrajectoryCrafter/issues/20"},
	{Name: "l40s", Model: "NVIDIA L40S", MiB: 46068, Source: "https://github.com/akash-network/provider-configs/pull/99", CUDAMiB: 45486, CUDASource: "https://github.com/stepfun-ai/Step-Video-T2V/issues/8", Note: "48 GB GDDR6, ECC on (49140 with ECC off)"},
	{Name: "v100-16gb", Model: "Tesla V100-SXM2-16GB", Aliases: []string{"v100"}, MiB: 16384, Source: "https://github.com/1CatAI/1Cat-vLLM/issues/85", CUDAMiB: 16159, CUDASource: "https://github.com/kchengiva/Shift-GCN/issues/34"},
	{Name: "v100-32gb", Model: "Tesla V100-SXM2-32GB", MiB: 32768, Source: "https://github.com/Wan-Video/Wan2.1/issues/5", CUDAMiB: 32502, CUDASource: "https://github.com/liucongg/ChatGLM-Finetuning/issues/73"},
	{Name: "p100", Model: "Tesla P100-PCIE-16GB", MiB: 16384, Source: "https://github.com/wookayin/gpustat/issues/130"},
	{Name: "a100-40gb", Model: "NVIDIA A100-SXM4-40GB", Aliases: []string{"a100-40"}, MiB: 40960, Source: "https://github.com/instructlab/instructlab/issues/2341", CUDAMiB: 40509, CUDASource: "https://github.com/threestudio-project/threestudio/issues/402"},
	{Name: "a100-80gb", Model: "NVIDIA A100-SXM4-80GB", Aliases: []string{"a100-80", "a100"}, MiB: 81920, Source: "https://github.com/allenai/PeerRead/issues/40", CUDAMiB: 81039, CUDASource: "https://github.com/lianqi1008/Control-GIC/issues/6"},
	{Name: "h100-80gb", Model: "NVIDIA H100 80GB HBM3", Aliases: []string{"h100", "h100-sxm"}, MiB: 81559, Source: "https://github.com/NVIDIA/nccl/issues/1264", CUDAMiB: 81009, CUDASource: "https://github.com/vllm-project/vllm/issues/27508"},
	{Name: "h100-nvl", Model: "NVIDIA H100 NVL", MiB: 95830, Source: "https://github.com/NVIDIA/gpu-admin-tools/issues/4", CUDAMiB: 95232, CUDASource: "https://github.com/ali-vilab/VACE/issues/56", Note: "94 GB"},
	{Name: "h200", Model: "NVIDIA H200", Aliases: []string{"h200-141gb"}, MiB: 143771, Source: "https://github.com/sgl-project/sglang/issues/3196", CUDAMiB: 143155, CUDASource: "bench/results/held-card-h200.txt", Note: "141 GB; also measured by batchfit's benches"},
	{Name: "b200", Model: "NVIDIA B200", MiB: 183359, Source: "https://github.com/NVIDIA/TensorRT-LLM/issues/10278"},
	{Name: "k80", Model: "Tesla K80", MiB: 11441, Source: "https://github.com/openmm/openmm/issues/2386", CUDAMiB: 11438, CUDASource: "https://github.com/lllyasviel/Fooocus/issues/2436", Note: "per GPU of the board; old drivers only"},
}

// Lookup finds a card by name or alias, case- and punctuation-insensitive:
// "A100-40GB", "a100_40gb", "RTX 4090" and "rtx4090" are all found.
func Lookup(name string) (Card, bool) {
	key := normalize(name)
	for _, c := range Known {
		if normalize(c.Name) == key || slices.ContainsFunc(c.Aliases, func(a string) bool { return normalize(a) == key }) {
			return c, true
		}
	}
	return Card{}, false
}

// Names lists the canonical names, for help and hints.
func Names() []string {
	out := make([]string, len(Known))
	for i, c := range Known {
		out[i] = c.Name
	}
	return out
}

func normalize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, s)
}
