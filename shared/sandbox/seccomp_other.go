//go:build !linux

package sandbox

import (
	"fmt"
	"os/exec"
	"runtime"
)

// startFiltered refuses to start cmd: Direct keeps commands off the network with a Linux
// seccomp filter, and runs nowhere else.
func startFiltered(cmd *exec.Cmd) error {
	return fmt.Errorf("sandbox: Direct runs on Linux only, not %s", runtime.GOOS)
}
