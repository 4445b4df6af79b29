//go:build unix

package browser

import (
	"os/exec"
	"syscall"
)

// killGroup starts Chromium in its own process group and makes context
// cancellation kill the whole group: Chromium forks zygote, renderer and
// utility processes that would otherwise outlive it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		stopGroup(cmd)
		return nil
	}
}

// stopGroup kills what is left of Chromium's process group.
func stopGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
