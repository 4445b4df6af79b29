package main

import (
	"strings"
	"testing"
)

func TestOutputsSamePath(t *testing.T) {
	o := outputOptions{reportPath: "x.svg", plotPath: "x.svg"}
	err := o.check()
	if err == nil || !strings.Contains(err.Error(), "same file") {
		t.Errorf("got %v", err)
	}
	if code := exitCode(err); code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
}
