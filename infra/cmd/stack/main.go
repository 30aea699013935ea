// Command stack runs a command with the local AWS stand-ins up: it starts DynamoDB Local and
// fauxqs, finds Chromium for the browser tests and bubblewrap for the sandbox tests (installing
// each with apt-get when it is missing and it runs as root), runs the command with the endpoint
// variables, HARNESS_CHROMIUM and HARNESS_BWRAP set, stops the stand-ins, and exits with the
// command's status. `make test` runs the test suite through it.
//
//	go run ./infra/cmd/stack -- go test ./...
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/agentharness/harness/infra/devstack"
)

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run() (int, error) {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return 2, errors.New("usage: stack -- command [args...]")
	}
	root, err := os.Getwd()
	if err != nil {
		return 1, err
	}
	if _, err := os.Stat(filepath.Join(root, "template.yaml")); err != nil {
		return 1, errors.New("run stack from the repository root")
	}
	// Interrupts reach the command too (same process group); wait for it, then clean up. The
	// signals are caught, not ignored: an ignored signal stays ignored in the stand-ins this
	// starts, and DynamoDB Local would then sit out Stop's SIGTERM until the SIGKILL.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt, syscall.SIGTERM)

	logf, err := os.CreateTemp("", "harness-stack-*.log")
	if err != nil {
		return 1, err
	}
	defer os.Remove(logf.Name())
	defer logf.Close()

	// The programs first: when one is missing and cannot be installed, nothing need start.
	var progEnv []string
	paths := make(map[string]string)
	for _, prog := range []devstack.Program{devstack.Chromium, devstack.Bubblewrap} {
		p, err := devstack.Ensure(context.Background(), prog, logf, func() {
			fmt.Fprintf(os.Stderr, "stack: installing %s (apt-get install %s)...\n", prog.Name, prog.Pkg)
		})
		if err != nil {
			if out, _ := os.ReadFile(logf.Name()); len(out) > 0 {
				return 1, fmt.Errorf("%w\napt-get output:\n%s", err, out)
			}
			return 1, err
		}
		progEnv = append(progEnv, prog.EnvVar+"="+p)
		paths[prog.Name] = p
	}

	s, err := devstack.Start(context.Background(), root, logf)
	if err != nil {
		out, _ := os.ReadFile(logf.Name())
		return 1, fmt.Errorf("%w\nstand-in output:\n%s", err, out)
	}
	defer s.Stop()
	fmt.Fprintf(os.Stderr, "stack: DynamoDB Local at %s, fauxqs (SQS, S3) at %s, Chromium at %s, bubblewrap at %s\n",
		s.DynamoDB, s.SQS, paths[devstack.Chromium.Name], paths[devstack.Bubblewrap.Name])

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), append(s.Env(), progEnv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}
