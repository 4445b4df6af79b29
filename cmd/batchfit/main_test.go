package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/batchfit/batchfit/internal/browser"
	"github.com/batchfit/batchfit/internal/sim"
	"github.com/batchfit/batchfit/internal/trial"
)

func TestMain(m *testing.M) {
	// Simulated trials re-execute this binary (os.Executable) in the child mode.
	if len(os.Args) > 1 && os.Args[1] == sim.ChildCommand {
		os.Exit(sim.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	testscript.Main(m, map[string]func(){
		"batchfit": func() {
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
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "torch" {
				// Debian's CPU torch, which scripts/test installs.
				return exec.Command("/usr/bin/python3", "-c", "import torch").Run() == nil, nil
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
