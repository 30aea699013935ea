package main

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/agentharness/harness/infra/lambdaruntime"
)

// dieWithParent has the kernel kill cmd's process if the benchmark dies first, so no function
// outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// signalProfile starts (SIGUSR1) or stops (SIGUSR2) a benchprofile binary's CPU profile, giving
// its signal goroutine a moment to act before the next turn or the process's end.
func signalProfile(p *lambdaruntime.Process, start bool) error {
	sig := syscall.SIGUSR2
	if start {
		sig = syscall.SIGUSR1
	}
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling the profiled process: %w", err)
	}
	time.Sleep(200 * time.Millisecond)
	return nil
}
