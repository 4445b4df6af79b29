// Package docs holds batchfit's documentation; its test holds the README
// to what the repository shows: its length, its two set-up commands, every
// measured figure against the result file it cites, and the demo's output
// against the demo.
package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const maxReadmeLines = 250

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadmeIsShort(t *testing.T) {
	if n := strings.Count(readme(t), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move details to docs/", n, maxReadmeLines)
	}
}

// The first code block is the two set-up commands that work on a fresh
// machine: the demo on the simulated GPU, and every test.
func TestReadmeSetUpCommands(t *testing.T) {
	blocks := codeBlocks(readme(t))
	if len(blocks) == 0 {
		t.Fatal("README.md has no code block")
	}
	var commands []string
	for _, line := range strings.Split(blocks[0], "\n") {
		command, _, _ := strings.Cut(line, "#")
		if command = strings.TrimSpace(command); command != "" {
			commands = append(commands, command)
		}
	}
	if len(commands) != 2 || commands[0] != "go run ./cmd/batchfit demo" || commands[1] != "./scripts/test" {
		t.Errorf("README.md's first code block runs %q: want the demo and ./scripts/test, nothing else", commands)
	}
	if _, err := os.Stat("../scripts/test"); err != nil {
		t.Error(err)
	}
}

var (
	citedFile = regexp.MustCompile("`(bench/results/[^`]+)`")
	digits    = regexp.MustCompile(`[0-9]+`)
)

// Every table row that cites a result file states only numbers that file
// holds: the row's cells but the citation, read as words, against the
// file's runs of digits.
func TestReadmeFiguresComeFromResults(t *testing.T) {
	rows := 0
	for _, line := range strings.Split(readme(t), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cited := citedFile.FindAllStringSubmatch(line, -1)
		if len(cited) == 0 {
			continue
		}
		rows++
		held := map[string]bool{}
		for _, c := range cited {
			b, err := os.ReadFile(filepath.Join("..", c[1]))
			if err != nil {
				t.Errorf("README row %q cites %s: %v", line, c[1], err)
				continue
			}
			for _, d := range digits.FindAllString(string(b), -1) {
				held[d] = true
			}
		}
		for _, n := range figures(citedFile.ReplaceAllString(line, "")) {
			if !held[n] {
				t.Errorf("README row %q: %s is not in %s", line, n, cited[0][1])
			}
		}
	}
	if rows == 0 {
		t.Error("README.md cites no result file in a table: its figures are unchecked")
	}
}

// figures are the numbers written as words of their own in a table row,
// outside code spans: "337", "1949", not the 50 of ResNet-50 or a path's.
func figures(row string) []string {
	var out []string
	for i, part := range strings.Split(row, "`") {
		if i%2 == 1 {
			continue // a code span: a path or a command
		}
		for _, w := range strings.FieldsFunc(part, func(r rune) bool { return strings.ContainsRune(" |,:;()", r) }) {
			if digits.FindString(w) == w {
				out = append(out, w)
			}
		}
	}
	return out
}

// The demo output the README shows is the demo's: its answer, proof and
// rounds lines (the time aside).
func TestReadmeDemoOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo")
	}
	text := readme(t)
	i := strings.Index(text, "`batchfit demo\n--memory-limit 24GiB` prints:")
	if i < 0 {
		t.Fatal("README.md no longer shows the demo's output after \"`batchfit demo --memory-limit 24GiB` prints:\"; update this test")
	}
	shown := codeBlocks(text[i:])[0]
	bin := filepath.Join(t.TempDir(), "batchfit")
	build := exec.Command("go", "build", "-o", bin, "../cmd/batchfit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout bytes.Buffer
	demo := exec.Command(bin, "demo", "--no-db", "--memory-limit", "24GiB")
	demo.Stdout = &stdout
	if err := demo.Run(); err != nil {
		t.Fatalf("batchfit demo: %v", err)
	}
	printed := map[string]bool{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		printed[withoutTime(line)] = true
	}
	for _, line := range strings.Split(shown, "\n") {
		if line != "" && !printed[withoutTime(line)] {
			t.Errorf("README shows %q; the demo prints:\n%s", line, stdout.String())
		}
	}
}

var seconds = regexp.MustCompile(`, [0-9.]+s$`)

func withoutTime(line string) string { return seconds.ReplaceAllString(line, "") }

// codeBlocks are the bodies of text's fenced code blocks, in order.
func codeBlocks(text string) []string {
	var out []string
	parts := strings.Split(text, "```")
	for i := 1; i+1 < len(parts); i += 2 {
		body := parts[i]
		if nl := strings.IndexByte(body, '\n'); nl >= 0 {
			body = body[nl+1:] // the info string (sh, python)
		}
		out = append(out, body)
	}
	return out
}
