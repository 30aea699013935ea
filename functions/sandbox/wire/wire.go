// Package wire builds the sandbox function's handler from its dependencies.
package wire

import (
	"context"
	"syscall"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/sandbox"
)

// Handler runs a request's command with sandbox.Direct in a fresh directory under /tmp and
// returns its result, cut to fit Lambda's response. A request Check refuses is the function's
// error.
//
// On Lambda (which sets AWS_LAMBDA_FUNCTION_MEMORY_SIZE) the execution environment runs nothing
// but this process and the commands, and is reused from one invocation to the next: after each
// run every other process is killed (Direct.Sweep), not only those of the run's session, so a
// daemon that left it never sees the next run. And the process makes itself undumpable: its
// /proc files (its environment, which holds the role's credentials, and its memory) then belong
// to root, out of reach of the commands, which run as its own user.
func Handler(d lambdadeps.Deps) func(context.Context, sandbox.Request) (sandbox.Result, error) {
	onLambda := d.Config.Runtime.MemoryMB != ""
	if onLambda {
		syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
	}
	run := &sandbox.Direct{Sweep: onLambda}
	return func(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
		res, err := run.Run(ctx, req)
		if err != nil {
			return sandbox.Result{}, err
		}
		return res, res.Fit(sandbox.MaxLambdaPayload)
	}
}
