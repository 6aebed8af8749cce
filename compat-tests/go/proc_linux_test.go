//go:build linux

package compat

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes the kernel kill the child if the test binary dies without running
// its cleanups (for example on a go test -timeout panic).
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
