//go:build !unix

package browser

import "os/exec"

// killGroup leaves the default: cancellation kills Chromium itself.
func killGroup(cmd *exec.Cmd) {}

// stopGroup kills Chromium itself.
func stopGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
