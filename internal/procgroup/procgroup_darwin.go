package procgroup

import "syscall"

// macOS has no NVIDIA GPU, and none of what procgroup_linux.go and the
// trial package control a child with (Pdeathsig, waitid with WNOWAIT,
// cgroups, /proc): batchfit starts no trial, warm worker or fork server
// here. These counterparts let their callers compile, and say so.

// CheckPlatform refuses: see PlatformError.
func CheckPlatform() error { return &PlatformError{OS: "macOS"} }

// Attr is a process group of its own; macOS has no Pdeathsig.
func Attr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// WaitExit is never reached: it waits for a child that StartPiped or
// trial.Run started, and both refuse here.
func WaitExit(pid int) <-chan struct{} {
	panic("procgroup: WaitExit on macOS, where batchfit starts no child")
}

// BecomeSubreaper does nothing: macOS has no subreapers, and batchfit
// starts no child here.
func BecomeSubreaper() {}
