package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/report"
	"github.com/batchfit/batchfit/internal/sim"
	"github.com/batchfit/batchfit/internal/testutil/browser"
	"github.com/batchfit/batchfit/internal/testutil/fulldisk"
	"github.com/batchfit/batchfit/internal/trial"
)

func TestMain(m *testing.M) {
	// Simulated trials re-execute this binary (os.Executable) in the child mode.
	if len(os.Args) > 1 && os.Args[1] == sim.ChildCommand {
		os.Exit(sim.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	testscript.Main(m, map[string]func(){
		"batchfit": func() {
			if fifo := os.Getenv(barrierEnv); fifo != "" {
				awaitBarrier(fifo)
			}
			code := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			// The status command of the scripts reads the exit code back.
			if f := os.Getenv("BATCHFIT_TEST_STATUS_FILE"); f != "" {
				os.WriteFile(f, []byte(strconv.Itoa(code)), 0o644)
			}
			os.Exit(code)
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("XDG_CACHE_HOME", env.WorkDir+"/cache")
			env.Setenv("BATCHFIT_TEST_STATUS_FILE", env.WorkDir+"/.status")
			// The stand-in jax the adapter's tests use (a pool, memory_stats,
			// XLA's out-of-memory error), for scripts that run a JAX trainer.
			fake, err := filepath.Abs("../../internal/adapter/testdata/fakejax")
			if err != nil {
				return err
			}
			env.Setenv("FAKEJAX", fake)
			// The Python package of this tree, for scripts that import
			// batchfit in the program that runs batchfit (oneline).
			pkg, err := filepath.Abs("../../python")
			if err != nil {
				return err
			}
			env.Setenv("BATCHFIT_PYTHON", pkg)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "full" {
				// The full run, not go test -short: scenarios that run
				// Python trainers (see testutil.NeedsFull).
				return !testing.Short(), nil
			}
			if cond == "torch" {
				// Debian's CPU torch, which scripts/test installs; never in
				// the fast tier.
				return !testing.Short() && exec.Command("/usr/bin/python3", "-c", "import torch").Run() == nil, nil
			}
			if cond == "mount" {
				// A full disk made of a tmpfs (fulldisk).
				return canMount(), nil
			}
			if cond == "cgroup2" {
				// Trials run in cgroups of their own.
				return trial.CgroupAvailable(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// waitfile PATH: wait (up to a minute) until PATH exists.
			"waitfile": func(ts *testscript.TestScript, neg bool, args []string) {
				deadline := time.Now().Add(time.Minute)
				for time.Now().Before(deadline) {
					if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				ts.Fatalf("%s did not appear", args[0])
			},
			// browsercheck PAGE SHOT: the page loads in headless Chromium
			// with no console errors and no outside requests, and renders.
			"browsercheck": func(ts *testscript.TestScript, neg bool, args []string) {
				if _, err := browser.Find(); err != nil {
					ts.Logf("chromium missing (scripts/test installs it): %v", err)
					ts.Fatalf("browsercheck needs chromium")
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := browser.Check(ctx, ts.MkAbs(args[0]), ts.MkAbs(args[1]))
				ts.Check(err)
				if len(res.ConsoleErrors) > 0 || len(res.Requests) > 0 || res.Blank {
					ts.Fatalf("page check: console errors %q, requests %q, blank %v", res.ConsoleErrors, res.Requests, res.Blank)
				}
			},
			// image FILE FORMAT W H: FILE is a valid image of that size.
			"image": func(ts *testscript.TestScript, neg bool, args []string) {
				checkImage(ts, args)
			},
			// flakyruns DIR LIMIT N: the N searches of a flaky trainer in
			// DIR (I.json, I.err, I.code) answer LIMIT or say they are flaky.
			"flakyruns": func(ts *testscript.TestScript, neg bool, args []string) {
				checkFlakyRuns(ts, args)
			},
			// envelope RUNS EXIT: stdout is one --json document, valid
			// against docs/batchfit.schema.json, with RUNS runs ("*": any
			// number) and the error of exit code EXIT (null for 0).
			"envelope": func(ts *testscript.TestScript, neg bool, args []string) {
				checkEnvelope(ts, args)
			},
			// fulldisk DIR: DIR is a full tmpfs until the script ends
			// (condition mount: whether this may mount one).
			"fulldisk": func(ts *testscript.TestScript, neg bool, args []string) {
				mountTmpfs(ts, neg, args, fulldisk.Mount)
			},
			// tmpfs DIR: DIR is an empty tmpfs of fulldisk.RoomySize
			// until the script ends, for a trial to fill.
			"tmpfs": func(ts *testscript.TestScript, neg bool, args []string) {
				mountTmpfs(ts, neg, args, func(dir string) (func() error, error) { return fulldisk.MountEmpty(dir, fulldisk.RoomySize) })
			},
			// status N: the last batchfit exited with code N.
			"status": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: status CODE")
				}
				got := strings.TrimSpace(ts.ReadFile(".status"))
				if (got == args[0]) == neg {
					ts.Fatalf("exit status %s, want %s", got, args[0])
				}
			},
		},
	})
}

// mountTmpfs runs the fulldisk and tmpfs commands: mount on DIR, made if
// need be, undone when the script ends.
func mountTmpfs(ts *testscript.TestScript, neg bool, args []string, mount func(dir string) (func() error, error)) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fulldisk|tmpfs DIR")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	unmount, err := mount(dir)
	ts.Check(err)
	ts.Defer(func() { ts.Check(unmount()) })
}

// canMount says whether this process may mount a tmpfs, as fulldisk does.
var canMount = sync.OnceValue(func() bool {
	dir, err := os.MkdirTemp("", "batchfit-mount-")
	if err != nil {
		return false
	}
	defer os.Remove(dir)
	unmount, err := fulldisk.Mount(dir)
	if err != nil {
		return false
	}
	return unmount() == nil
})

func checkImage(ts *testscript.TestScript, args []string) {
	if len(args) != 4 {
		ts.Fatalf("usage: image FILE png|svg WIDTH HEIGHT")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	var w, h string
	switch args[1] {
	case "png":
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		ts.Check(err)
		w, h = strconv.Itoa(cfg.Width), strconv.Itoa(cfg.Height)
	case "svg":
		var root struct {
			XMLName xml.Name
			Width   string `xml:"width,attr"`
			Height  string `xml:"height,attr"`
		}
		ts.Check(xml.Unmarshal(data, &root))
		if root.XMLName.Local != "svg" {
			ts.Fatalf("root element is %s, not svg", root.XMLName.Local)
		}
		w, h = svgPixels(ts, root.Width), svgPixels(ts, root.Height)
	default:
		ts.Fatalf("unknown format %s", args[1])
	}
	if w != args[2] || h != args[3] {
		ts.Fatalf("image is %sx%s, want %sx%s", w, h, args[2], args[3])
	}
}

// svgPixels converts an SVG length (px or pt) to CSS pixels.
func svgPixels(ts *testscript.TestScript, length string) string {
	scale := 1.0
	num := strings.TrimSuffix(length, "px")
	if n, ok := strings.CutSuffix(length, "pt"); ok {
		num, scale = n, 96.0/72
	}
	v, err := strconv.ParseFloat(num, 64)
	ts.Check(err)
	return strconv.Itoa(int(v*scale + 0.5))
}

// checkFlakyRuns checks the searches of a trainer that runs out of memory at
// random near its limit. Every run exits 0 and is not cached. A
// run that reports no flaky size is exact, and must answer the limit; a
// flaky one warns, and answers the safe side: below every flaky size, seen
// to run twice or more and never to fail.
//
// A spurious failure at a size that fits passes for a real one only when it
// repeats in all its re-checks (p³ after a first failure, for p = 20 %):
// simulated, 0.21 % of these searches end exact but wrong, so one of 20
// does about 4 % of the time, and two 0.08 %. The check allows one, so that
// the test fails on a broken rule and not on bad luck.
func checkFlakyRuns(ts *testscript.TestScript, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: flakyruns DIR LIMIT N")
	}
	limit, err := strconv.Atoi(args[1])
	ts.Check(err)
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	exact, wrong := 0, 0
	for i := 1; i <= n; i++ {
		base := filepath.Join(args[0], strconv.Itoa(i))
		code := strings.TrimSpace(ts.ReadFile(base + ".code"))
		stderr := ts.ReadFile(base + ".err")
		doc, err := parseDocument([]byte(ts.ReadFile(base + ".json")))
		if err != nil || len(doc.Runs) != 1 {
			ts.Fatalf("run %d: %v", i, err)
		}
		run := *doc.Runs[0]
		if code != "0" || run.Status != record.Found || run.Cached {
			ts.Fatalf("run %d: exit %s, status %s, cached %v; stderr:\n%s", i, code, run.Status, run.Cached, stderr)
		}
		if len(run.Flaky) == 0 {
			exact++
			if run.Answer != limit {
				wrong++
				ts.Logf("run %d: exact %d, but the limit is %d; trials %s", i, run.Answer, limit, trialText(run.Trials))
			}
			continue
		}
		if !strings.Contains(stderr, "batchfit: warning: the boundary is flaky: ") {
			ts.Fatalf("run %d: flaky %+v without a warning; stderr:\n%s", i, run.Flaky, stderr)
		}
		if msg := safeSide(&run, limit); msg != "" {
			ts.Fatalf("run %d: %s; trials %s", i, msg, trialText(run.Trials))
		}
	}
	ts.Logf("%d of %d runs exact (%d wrong), the rest flaky with the safe side", exact, n, wrong)
	if wrong > 1 {
		ts.Fatalf("%d of %d runs exact but wrong", wrong, n)
	}
}

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// docSchema is docs/batchfit.schema.json, compiled once.
func docSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		path, err := filepath.Abs("../../docs/batchfit.schema.json")
		if err != nil {
			schemaErr = err
			return
		}
		schema, schemaErr = c.Compile(path)
	})
	return schema, schemaErr
}

// parseDocument reads out as exactly one --json document, valid against
// the schema.
func parseDocument(out []byte) (*report.Document, error) {
	sch, err := docSchema()
	if err != nil {
		return nil, fmt.Errorf("compile the schema: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a JSON document: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON document on stdout")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if err := sch.Validate(inst); err != nil {
		return nil, fmt.Errorf("not valid against docs/batchfit.schema.json: %w", err)
	}
	var doc report.Document
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

func checkEnvelope(ts *testscript.TestScript, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: envelope RUNS EXIT")
	}
	doc, err := parseDocument([]byte(ts.ReadFile("stdout")))
	if err != nil {
		ts.Fatalf("stdout: %v", err)
	}
	if args[0] != "*" && strconv.Itoa(len(doc.Runs)) != args[0] {
		ts.Fatalf("%d runs, want %s", len(doc.Runs), args[0])
	}
	switch {
	case args[1] == "0" && doc.Error != nil:
		ts.Fatalf("error %+v, want null", *doc.Error)
	case args[1] != "0" && (doc.Error == nil || strconv.Itoa(doc.Error.ExitCode) != args[1]):
		ts.Fatalf("error %+v, want exit code %s", doc.Error, args[1])
	}
}

// safeSide says what keeps a flaky run's answer from being the safe side,
// or "" when it is.
func safeSide(run *record.Run, limit int) string {
	for _, f := range run.Flaky {
		if f.Size <= run.Answer || f.OK == 0 || f.Failed == 0 {
			return fmt.Sprintf("answer %d, flaky %+v: not the safe side of a flaky size", run.Answer, f)
		}
	}
	ok, failed := 0, 0
	for _, tr := range run.Trials {
		if tr.Size == run.Answer && tr.Outcome.Fits() {
			ok++
		} else if tr.Size == run.Answer {
			failed++
		}
	}
	if ok < 2 || failed > 0 || run.Answer > limit {
		return fmt.Sprintf("answer %d ran %d times and failed %d (limit %d): not the safe side", run.Answer, ok, failed, limit)
	}
	return ""
}

// trialText is a run's trials in order: +size ran, xsize did not.
func trialText(trials []record.Trial) string {
	var b strings.Builder
	for _, tr := range trials {
		mark := "+"
		if !tr.Outcome.Fits() {
			mark = "x"
		}
		fmt.Fprintf(&b, "%s%d ", mark, tr.Size)
	}
	return strings.TrimSpace(b.String())
}
