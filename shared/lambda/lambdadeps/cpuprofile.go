//go:build benchprofile

package lambdadeps

import (
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// With the benchprofile tag (make bench -fn-cpuprofile builds harness-processing so), a function
// whose HARNESS_CPUPROFILE names a file profiles its CPU from SIGUSR1 to SIGUSR2, so the
// benchmark profiles exactly the turns it measures. Deployed binaries never carry this file.
func init() {
	path := os.Getenv("HARNESS_CPUPROFILE")
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				var err error
				if f, err = os.Create(path); err == nil {
					err = pprof.StartCPUProfile(f)
				}
				if err != nil {
					os.Stderr.WriteString("cpuprofile: " + err.Error() + "\n")
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				f.Close()
				f = nil
			}
		}
	}()
}
