package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/record"
)

// -update rewrites the golden files. Another test file of this package may
// register the same flag as a package-level variable, which initializes
// before this init runs; then both share it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files in testdata")
	}
}

func chartUpdating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// chartGolden compares got with testdata/name, or rewrites it under -update.
func chartGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if chartUpdating() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (%d bytes, want %d); look at the output and run go test -update if it is right", name, len(got), len(want))
		if dir := t.TempDir(); dir != "" {
			p := filepath.Join(dir, name)
			if os.WriteFile(p, got, 0o644) == nil {
				t.Logf("output written to %s", p)
			}
		}
	}
}

// chartLoadRun reads a run record from testdata.
func chartLoadRun(t *testing.T, name string) *record.Run {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var run record.Run
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return &run
}

// chartResNet is the realistic fixture: a ResNet-50 search on an 80 GiB
// A100, with OOMs, a fitted model, step times, margin and recommended sizes.
func chartResNet(t *testing.T) *record.Run {
	return chartLoadRun(t, "run-resnet50-a100.json")
}

// chartLimited is the fixture as if searched with --memory-limit 24GiB on
// a 141 GiB H200: the card is far off the scale of the data.
func chartLimited(t *testing.T) *record.Run {
	run := chartResNet(t)
	const gib = 1 << 30
	run.GPU.Devices[0].Name = "NVIDIA H200"
	run.GPU.Devices[0].Total = 141 * gib
	run.Settings.MemoryLimit = 24 * gib
	run.GPU.Capacity = 24 * gib
	var trials []record.Trial
	for _, tr := range run.Trials {
		if tr.Size > 282 {
			continue
		}
		trials = append(trials, tr)
	}
	trials = append(trials,
		record.Trial{N: 5, Size: 512, Outcome: classify.OOM, Reason: "CUDA out of memory"},
		record.Trial{N: 6, Size: 282, Outcome: classify.OK, Allocated: 23_800_000_000, Reserved: 24_000_000_000, Device: 25_300_000_000, StepTimes: []float64{0.2, 0.117, 0.118}},
		record.Trial{N: 7, Size: 283, Outcome: classify.OOM},
	)
	run.Trials = trials
	run.Answer, run.FirstFailure, run.Margin, run.Recommended = 282, 283, 270, 256
	return run
}

// chartSoaked is the fixture searched with --soak 10m: the soak of 968
// ran out of memory after 3120 steps, its memory rising all along, so the
// answer moved down to 967, whose soak survived with its memory settled.
func chartSoaked(t *testing.T) *record.Run {
	run := chartResNet(t)
	peaks := func(n int, base, perStep uint64, settle int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = base + uint64(min(i, settle))*perStep
		}
		return out
	}
	first := record.Soak{Size: 968, Trial: 9, Limit: 600, Seconds: 312.4, Outcome: classify.OOM,
		Reason: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 196.00 MiB", Steps: 3120,
		StepPeaks: peaks(3120, 83_448_697_978, 750_000, 3120)}
	second := record.Soak{Size: 967, Trial: 11, Limit: 600, Seconds: 600, Outcome: classify.OK,
		Reason: "soaked: stopped by batchfit after 10m0s", Steps: 6000,
		StepPeaks: peaks(6000, 83_364_287_610, 300_000, 2000)}
	run.Soaks = []record.Soak{first, second}
	run.Trials = append(run.Trials,
		record.Trial{N: 9, Size: 968, Outcome: classify.OOM, Phase: record.PhaseSoak, Seconds: 312.4, Steps: 3120, Reason: first.Reason},
		record.Trial{N: 10, Size: 967, Outcome: classify.OK, Phase: "bracket", Seconds: 13.1, Allocated: 83_364_287_610, StepTimes: []float64{2.04, 0.3823, 0.3834}},
		record.Trial{N: 11, Size: 967, Outcome: classify.OK, Phase: record.PhaseSoak, Seconds: 600, Steps: 6000, Reason: second.Reason},
	)
	run.Answer, run.FirstFailure = 967, 968
	run.Settings.SoakSecs = 600
	run.Warnings = []string{"soaked 10m at 968: out of memory after 3120 steps; the answer is now 967"}
	return run
}

// chartNoFigures is a run without NVML or the adapter: outcomes only.
func chartNoFigures() *record.Run {
	return &record.Run{
		Status:   record.Found,
		Command:  []string{"./train", "--bs", "{}"},
		Settings: record.Settings{Min: 1, Max: 1024, Steps: 3},
		Trials: []record.Trial{
			{N: 1, Size: 32, Outcome: classify.OK},
			{N: 2, Size: 64, Outcome: classify.OK},
			{N: 3, Size: 128, Outcome: classify.OOM},
			{N: 4, Size: 96, Outcome: classify.Timeout},
			{N: 5, Size: 80, Outcome: classify.OK},
			{N: 6, Size: 88, Outcome: classify.Crash},
		},
		Answer: 80,
	}
}

func TestMemoryChartGolden(t *testing.T) {
	tests := []struct {
		golden string
		run    *record.Run
	}{
		{"chart-memory-resnet50.golden.svg", chartResNet(t)},
		{"chart-memory-limit.golden.svg", chartLimited(t)},
		{"chart-memory-no-figures.golden.svg", chartNoFigures()},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMemoryChart(&buf, tt.run, "svg", ChartWidth, ChartHeight); err != nil {
				t.Fatal(err)
			}
			chartGolden(t, tt.golden, buf.Bytes())
		})
	}
}

func TestSoakChartGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSoakChart(&buf, chartSoaked(t), "svg", ChartWidth, ChartHeight); err != nil {
		t.Fatal(err)
	}
	chartGolden(t, "chart-soak-resnet50.golden.svg", buf.Bytes())
}

// The soak chart says how each soak ended and what it did to the answer,
// whichever figures the soaks have.
func TestSoakChartContent(t *testing.T) {
	noPeaks := chartSoaked(t)
	for i := range noPeaks.Soaks {
		noPeaks.Soaks[i].StepPeaks = nil
	}
	limited := chartSoaked(t)
	limited.GPU.Capacity = 200 << 30
	nothing := chartSoaked(t)
	nothing.Soaks = nothing.Soaks[:1]
	nothing.Status, nothing.Answer = record.NothingFits, 0
	hostile := chartSoaked(t)
	hostile.Soaks[0].Outcome = classify.Outcome("<b>weird</b>")
	tests := []struct {
		name string
		run  *record.Run
		want []string
		not  []string
	}{
		{"moved down", chartSoaked(t), []string{"Peak memory by step during --soak", "batch 968: out of memory after 3120 steps",
			"moved the answer down to 967", "batch 967: ran 6000 steps", "kept the answer", "capacity: 80.00 GiB", "step"},
			[]string{"off scale", "no per-step peaks"}},
		{"no peaks", noPeaks, []string{"no per-step peaks were reported", "batch 968: out of memory after 3120 steps", "(no per-step peaks)"}, nil},
		{"capacity off scale", limited, []string{"capacity: 200.00 GiB (off scale)"}, nil},
		{"nothing fits below", nothing, []string{"nothing below it fits"}, []string{"moved the answer"}},
		{"the record's text stays out", hostile, []string{"batch 968: failed after 3120 steps"}, []string{"weird"}},
		{"no soak", chartResNet(t), []string{"no soak was run"}, []string{"batch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteSoakChart(&buf, tt.run, "svg", ChartWidth, ChartHeight); err != nil {
				t.Fatal(err)
			}
			svg := buf.String()
			for _, s := range tt.want {
				if !strings.Contains(svg, s) {
					t.Errorf("chart lacks %q", s)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(svg, s) {
					t.Errorf("chart has %q, want it absent", s)
				}
			}
		})
	}
}

// A soak's curve keeps at most chartSoakPoints points, each the highest
// peak of its steps at the last of them.
func TestChartDownsample(t *testing.T) {
	peaks := make([]uint64, 10000)
	for i := range peaks {
		peaks[i] = uint64(i % 7)
	}
	peaks[4321] = 99 * chartGiB
	xys := chartDownsample(peaks, chartSoakPoints)
	if len(xys) != chartSoakPoints || xys[len(xys)-1].X != 10000 {
		t.Fatalf("%d points ending at step %v, want %d ending at 10000", len(xys), xys[len(xys)-1].X, chartSoakPoints)
	}
	top := 0.0
	for _, xy := range xys {
		top = math.Max(top, xy.Y)
	}
	if top != 99 {
		t.Errorf("the highest peak became %v GiB, want 99", top)
	}
	short := chartDownsample([]uint64{chartGiB, 2 * chartGiB}, chartSoakPoints)
	if len(short) != 2 || short[0].X != 1 || short[1].Y != 2 {
		t.Errorf("two steps gave %v", short)
	}
}

func TestThroughputChartGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteThroughputChart(&buf, chartResNet(t), "svg", ChartWidth, ChartHeight); err != nil {
		t.Fatal(err)
	}
	chartGolden(t, "chart-throughput-resnet50.golden.svg", buf.Bytes())
}

// The charts say what they show: the legend and labels carry the numbers a
// reader needs, whichever figures the run has.
func TestMemoryChartContent(t *testing.T) {
	deviceOnly := chartResNet(t)
	for i := range deviceOnly.Trials {
		deviceOnly.Trials[i].Allocated = 0
	}
	deviceOnly.Model.Figure = "device"
	allocOnly := chartResNet(t)
	for i := range allocOnly.Trials {
		allocOnly.Trials[i].Device = 0
	}
	tests := []struct {
		name string
		run  *record.Run
		want []string
		not  []string
	}{
		{"both figures", chartResNet(t),
			[]string{"peak memory (GiB)", "peak allocated (PyTorch)", "peak device (NVML)", "card: 80.00 GiB",
				"model: 1.62 GiB + 80.5 MiB/sample", "answer: 968", "margin size: 920", "too large: oom"},
			[]string{"memory limit", "off scale"}},
		{"device only", deviceOnly,
			[]string{"peak device memory (GiB, NVML)", "peak device (NVML)"},
			[]string{"peak allocated (PyTorch)"}},
		{"allocated only", allocOnly,
			[]string{"peak allocated memory (GiB, PyTorch)"},
			[]string{"peak device (NVML)"}},
		{"memory limit", chartLimited(t),
			[]string{"memory limit: 24.00 GiB", "card: 141.00 GiB (off scale)", "answer: 282"},
			nil},
		{"no figures", chartNoFigures(),
			[]string{"no memory was measured", "fits (ok)", "too large: oom, timeout", "crash / canceled", "answer: 80"},
			[]string{"peak unknown"}},
		{"a failure's memory when it failed", heldRun(t),
			[]string{"too large: oom (needs more than shown)"}, nil},
		{"no trials", &record.Run{Status: record.Running},
			[]string{"no trials were run"}, []string{"answer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMemoryChart(&buf, tt.run, "svg", ChartWidth, ChartHeight); err != nil {
				t.Fatal(err)
			}
			svg := buf.String()
			for _, s := range tt.want {
				if !strings.Contains(svg, s) {
					t.Errorf("chart lacks %q", s)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(svg, s) {
					t.Errorf("chart has %q, want it absent", s)
				}
			}
		})
	}
}

func TestThroughputChartContent(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteThroughputChart(&buf, chartResNet(t), "svg", ChartWidth, ChartHeight); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"samples / s", "recommended: 484", "largest size: 968", "trials that fit"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("throughput chart lacks %q", s)
		}
	}
	buf.Reset()
	if err := WriteThroughputChart(&buf, chartNoFigures(), "svg", ChartWidth, ChartHeight); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "no step times were recorded") {
		t.Error("throughput chart without step times does not say so")
	}
}

// Degenerate records draw without panicking, in both formats, and give a
// valid image of the asked size.
func TestChartsDegenerate(t *testing.T) {
	const gib = 1 << 30
	one := func(tr record.Trial) *record.Run {
		return &record.Run{Status: record.Found, Trials: []record.Trial{tr}, GPU: &record.GPUInfo{Capacity: 8 * gib}}
	}
	nan := chartResNet(t)
	nan.Model.Slope = math.NaN()
	inf := chartResNet(t)
	inf.Trials[0].StepTimes = []float64{0, 0, 0}
	tests := []struct {
		name string
		run  *record.Run
	}{
		{"empty", &record.Run{}},
		{"one ok", one(record.Trial{N: 1, Size: 1, Outcome: classify.OK, Allocated: gib, StepTimes: []float64{0.1}})},
		{"one oom", one(record.Trial{N: 1, Size: 1, Outcome: classify.OOM})},
		{"one crash", one(record.Trial{N: 1, Size: 0, Outcome: classify.Crash})},
		{"nothing fits", &record.Run{Status: record.NothingFits, Settings: record.Settings{Min: 1},
			Trials: []record.Trial{{N: 1, Size: 1, Outcome: classify.HostOOM}, {N: 2, Size: 1, Outcome: classify.SizeLimit}}}},
		{"no gpu, no capacity", &record.Run{Trials: []record.Trial{
			{N: 1, Size: 8, Outcome: classify.OK, Device: 3 * gib}, {N: 2, Size: 16, Outcome: classify.OOM}}}},
		{"gpu without devices", &record.Run{GPU: &record.GPUInfo{}, Trials: []record.Trial{{N: 1, Size: 8, Outcome: classify.OK, Allocated: gib}}}},
		{"two cards", &record.Run{GPU: &record.GPUInfo{Devices: []gpu.Device{{Total: 80 * gib}, {Total: 40 * gib}}},
			Trials: []record.Trial{{N: 1, Size: 8, Outcome: classify.OK, Device: gib}}}},
		{"NaN model", nan},
		{"zero step times", inf},
		{"huge sizes", one(record.Trial{N: 1, Size: math.MaxInt32, Outcome: classify.OK, Allocated: math.MaxUint64, StepTimes: []float64{1e-9}})},
		{"negative model", &record.Run{Model: &record.Model{Intercept: -5 * gib, Slope: -1}, Trials: []record.Trial{{N: 1, Size: 4, Outcome: classify.OK, Allocated: gib}}}},
		{"soak of one step", &record.Run{Soaks: []record.Soak{{Size: 4, Outcome: classify.OOM, Steps: 1, StepPeaks: []uint64{gib}}}}},
		{"soak of zero peaks", &record.Run{Soaks: []record.Soak{{Size: 4, Outcome: classify.OK, StepPeaks: []uint64{0, 0}}}, GPU: &record.GPUInfo{Capacity: 8 * gib}}},
		{"soak of huge peaks", &record.Run{Soaks: []record.Soak{{Size: 4, Outcome: classify.Crash, Steps: math.MaxInt32, StepPeaks: []uint64{math.MaxUint64}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, draw := range []func(*bytes.Buffer, string) error{
				func(b *bytes.Buffer, f string) error { return WriteMemoryChart(b, tt.run, f, 640, 400) },
				func(b *bytes.Buffer, f string) error { return WriteThroughputChart(b, tt.run, f, 640, 400) },
				func(b *bytes.Buffer, f string) error { return WriteSoakChart(b, tt.run, f, 640, 400) },
			} {
				var buf bytes.Buffer
				if err := draw(&buf, "png"); err != nil {
					t.Fatalf("png: %v", err)
				}
				cfg, err := png.DecodeConfig(&buf)
				if err != nil || cfg.Width != 640 || cfg.Height != 400 {
					t.Errorf("png: %d×%d, %v; want a 640×400 PNG", cfg.Width, cfg.Height, err)
				}
				buf.Reset()
				if err := draw(&buf, "svg"); err != nil {
					t.Fatalf("svg: %v", err)
				}
				if !strings.Contains(buf.String(), "</svg>") {
					t.Error("svg output is not a whole SVG document")
				}
			}
		})
	}
}

func TestWriteMemoryChartPNGSize(t *testing.T) {
	for _, size := range [][2]int{{ChartWidth, ChartHeight}, {1200, 700}, {300, 200}} {
		var buf bytes.Buffer
		if err := WriteMemoryChart(&buf, chartResNet(t), "png", size[0], size[1]); err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(&buf)
		if err != nil {
			t.Fatalf("%v: not a PNG: %v", size, err)
		}
		if cfg.Width != size[0] || cfg.Height != size[1] {
			t.Errorf("PNG is %d×%d, want %d×%d", cfg.Width, cfg.Height, size[0], size[1])
		}
	}
}

func TestWriteChartErrors(t *testing.T) {
	run := chartResNet(t)
	tests := []struct {
		name          string
		format        string
		width, height int
		want          string
	}{
		{"pdf", "pdf", 800, 500, `unknown format "pdf"`},
		{"empty format", "", 800, 500, "unknown format"},
		{"zero size", "svg", 0, 500, "size 0×500 px"},
		{"negative", "png", 800, -1, "size 800×-1 px"},
		{"enormous", "png", 100000, 500, "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := WriteMemoryChart(&buf, run, tt.format, tt.width, tt.height)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes on error", buf.Len())
			}
		})
	}
	if err := WriteMemoryChart(&bytes.Buffer{}, nil, "svg", 800, 500); err == nil {
		t.Error("WriteMemoryChart(nil run) succeeded")
	}
	if err := WriteThroughputChart(&bytes.Buffer{}, nil, "svg", 800, 500); err == nil {
		t.Error("WriteThroughputChart(nil run) succeeded")
	}
	if err := WriteSoakChart(&bytes.Buffer{}, nil, "svg", 800, 500); err == nil {
		t.Error("WriteSoakChart(nil run) succeeded")
	}
}

func TestWritePlotFile(t *testing.T) {
	dir := t.TempDir()
	run := chartResNet(t)
	for _, name := range []string{"mem.png", "MEM.PNG", "mem.svg"} {
		path := filepath.Join(dir, name)
		if err := WritePlotFile(path, run); err != nil {
			t.Fatalf("WritePlotFile(%s): %v", name, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(strings.ToLower(name), ".png") {
			cfg, err := png.DecodeConfig(bytes.NewReader(data))
			if err != nil || cfg.Width != ChartWidth || cfg.Height != ChartHeight {
				t.Errorf("%s: %d×%d, %v; want a %d×%d PNG", name, cfg.Width, cfg.Height, err, ChartWidth, ChartHeight)
			}
		} else if !bytes.Contains(data, []byte(`viewBox="0 0 600 375"`)) {
			t.Errorf("%s: want an 800×500 px (600×375 pt) SVG", name)
		}
	}
	for _, name := range []string{"mem.pdf", "mem.txt", "mem"} {
		path := filepath.Join(dir, name)
		err := WritePlotFile(path, run)
		if err == nil || !strings.Contains(err.Error(), "use a .png or .svg file name") {
			t.Errorf("WritePlotFile(%s) error = %v, want a format error", name, err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("WritePlotFile(%s) left a file behind", name)
		}
	}
	if err := WritePlotFile(filepath.Join(dir, "no-such-dir", "mem.png"), run); err == nil {
		t.Error("WritePlotFile into a missing directory succeeded")
	}

	// On its own, the chart names its command, GPU and date; the command's
	// text is escaped.
	run.Command = []string{"python", "train.py", "--tag", "<b>&"}
	path := filepath.Join(dir, "named.svg")
	if err := WritePlotFile(path, run); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	caption := plotCaption(run)
	for _, want := range []string{"python train.py --tag '<b>&'", run.GPU.Devices[0].Name, run.Started.Local().Format("2006-01-02 15:04")} {
		escaped := strings.NewReplacer("'", "&#39;", "<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(want)
		if !strings.Contains(caption, want) || !bytes.Contains(data, []byte(escaped)) {
			t.Errorf("standalone chart: %q missing (caption %q)", want, caption)
		}
	}
	if bytes.Contains(data, []byte("<b>")) {
		t.Error("standalone chart: the command's text is not escaped")
	}
}

// heldRun is the fixture with its first failure's memory known: what it
// held when it ran out.
func heldRun(t *testing.T) *record.Run {
	run := chartResNet(t)
	for i := range run.Trials {
		if run.Trials[i].Size == 969 {
			run.Trials[i].Allocated = 78 << 30
		}
	}
	return run
}

// TestMemoryChartDemoBoundary draws the demo's search on its simulated
// H100 (testdata/run-demo-h100.json, `batchfit demo --json`), where 952
// runs and 953 runs out of memory: the model line is the one the boundary
// was decided against (the allocated fit with the CUDA context outside it),
// so it lies below the card at every size that ran and above it at every
// size that failed, and each failure's ✗ lies above the peaks of the
// largest size below it that ran.
func TestMemoryChartDemoBoundary(t *testing.T) {
	run := chartLoadRun(t, "run-demo-h100.json")
	if run.Model == nil || run.Model.Figure != "allocated" || run.Model.Outside <= 0 {
		t.Fatalf("model %+v, want the allocated fit with the context outside it", run.Model)
	}
	card := float64(run.GPU.Capacity)
	m := memoryPointsOf(run)
	for _, tr := range run.Trials {
		at := modelBytes(run.Model, float64(tr.Size))
		switch {
		case tr.Outcome.Fits() && at > card:
			t.Errorf("the model line crosses the card at %d, which ran: %.0f > %.0f", tr.Size, at, card)
		case tr.Outcome.TooLarge() && at <= card:
			t.Errorf("the model line is below the card at %d, which failed: %.0f <= %.0f", tr.Size, at, card)
		}
	}
	if len(m.fails) == 0 {
		t.Fatal("no failed trial drawn")
	}
	for _, f := range m.fails {
		below := 0.0
		for _, xy := range slices.Concat(m.alloc, m.device) {
			if xy.X < f.X {
				below = math.Max(below, xy.Y)
			}
		}
		if math.IsNaN(f.Y) || f.Y <= below {
			t.Errorf("the ✗ at %.0f is drawn at %.3f GiB, not above %.3f GiB, the peak of the size below it that ran", f.X, f.Y, below)
		}
	}
}
