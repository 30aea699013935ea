//go:build !linux

package main

import (
	"errors"
	"os/exec"

	"github.com/agentharness/harness/infra/lambdaruntime"
)

// dieWithParent is Linux's alone: elsewhere a function started by the benchmark is only
// stopped by it.
func dieWithParent(*exec.Cmd) {}

// signalProfile needs Linux's user signals.
func signalProfile(*lambdaruntime.Process, bool) error {
	return errors.New("-fn-cpuprofile needs Linux")
}
