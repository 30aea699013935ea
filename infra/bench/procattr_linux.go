package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process if the benchmark dies first, so no function
// outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
