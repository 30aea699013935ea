package workspacetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool"
	"golang.org/x/sync/errgroup"
)

const bashDescription = "Runs a shell command (/bin/sh -c) in a sandbox: no network, no secrets, bounded time, memory and output."

var bashSchema = Schema(`"command":{"type":"string","minLength":1},"timeoutMs":{"type":"integer","minimum":1,"description":"How long the command may run, in milliseconds; at most the sandbox's wall time limit."}`, "command")

// scratchBash is the bash of an agent with a sandbox and no workspace: each call starts from an
// empty root and what it writes is dropped.
func (s *Toolset) scratchBash(sb agentconfig.Sandbox, base sandbox.Request) tool.Tool {
	return tool.Tool{
		Name:        agentconfig.Bash,
		Description: bashDescription + " Each call starts in an empty directory and what it writes is dropped after it.",
		InputSchema: bashSchema,
		Approval:    Approval(sb.PermissionMode, agentconfig.Bash),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			req, err := request(ctx, input, base)
			if err != nil {
				return nil, err
			}
			res, err := s.runner.Run(ctx, req)
			if err != nil {
				return nil, err
			}
			return output(res), nil
		},
	}
}

// invocationMargin is what a bash call leaves of its invocation after the command: the time to
// commit what it changed and answer.
const invocationMargin = 10 * time.Second

// request is the sandbox request of a bash call's input: base (the agent's limits and
// variables) with its command. timeoutMs shortens the wall time, never lengthens it, and so does
// what is left of the invocation (ctx's deadline, less invocationMargin), which a command must
// not outlive: a function's timeout (ws-gateway's 30 s) may be shorter than the sandbox's wall
// time.
func request(ctx context.Context, input json.RawMessage, base sandbox.Request) (sandbox.Request, error) {
	var args struct {
		Command   string
		TimeoutMs int64
	}
	if err := json.Unmarshal(input, &args); err != nil {
		return sandbox.Request{}, err
	}
	lim := base.Limits.WithDefaults()
	if args.TimeoutMs > 0 {
		lim.WallSeconds = int(min((args.TimeoutMs+999)/1000, int64(lim.WallSeconds)))
	}
	if deadline, ok := ctx.Deadline(); ok {
		left := int(time.Until(deadline.Add(-invocationMargin)) / time.Second)
		if left < 1 {
			return sandbox.Request{}, errors.New("this invocation has too little time left to run a command; try again in the next turn")
		}
		lim.WallSeconds = min(lim.WallSeconds, left)
	}
	return sandbox.Request{Command: args.Command, Limits: lim, Env: base.Env, Network: "none"}, nil
}

// baseRequest is what every bash call of the agent starts from: its sandbox's limits, and the
// values in the thread of the variables it names (sandbox.variables; the harness's environment
// never stands in for one).
func baseRequest(sb agentconfig.Sandbox, vars tool.Vars) sandbox.Request {
	req := sandbox.Request{Limits: sb.Limits}
	for _, name := range sb.Variables {
		if vars.Get == nil {
			break
		}
		if v := vars.Get(name); v != "" {
			if req.Env == nil {
				req.Env = map[string]string{}
			}
			req.Env[name] = v
		}
	}
	return req
}

// output is what the model is told of a run.
func output(res sandbox.Result) map[string]any {
	out := map[string]any{"exitCode": res.ExitCode, "stdout": res.Stdout, "stderr": res.Stderr, "timedOut": res.TimedOut}
	if res.StdoutTruncated {
		out["stdoutNote"] = "stdout was cut at the sandbox's output limit"
	}
	if res.StderrTruncated {
		out["stderrNote"] = "stderr was cut at the sandbox's output limit"
	}
	if res.Killed != "" {
		out["killed"] = "killed at the " + res.Killed
	}
	return out
}

// bash runs the command over a copy of the workspace's latest version and commits what it
// changed as one commit over that version: a path another writer changed meanwhile makes the
// commit a conflict, which the result reports.
func (w *workspace) bash(ctx context.Context, input json.RawMessage) (any, error) {
	req, err := request(ctx, input, w.bashBase)
	if err != nil {
		return nil, err
	}
	t, err := w.store.Tree(ctx, w.accountID, w.name, workspaces.Latest)
	if err != nil {
		return nil, err
	}
	// Bounded by the tree's sizes before any file is read.
	if n := len(t.Files); n > req.Limits.MaxFiles {
		return nil, fmt.Errorf("workspace %s has %d files, more than the sandbox takes (sandbox.limits.maxFiles, %d); bash cannot run in it", w.name, n, req.Limits.MaxFiles)
	}
	if n := t.Bytes(); n > req.Limits.MaxBytes {
		return nil, fmt.Errorf("workspace %s holds %d bytes, more than the sandbox takes (sandbox.limits.maxBytes, %d); bash cannot run in it", w.name, n, req.Limits.MaxBytes)
	}
	if req.Files, err = w.files(ctx, t); err != nil {
		return nil, err
	}
	res, err := w.runner.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	out := output(res)
	var changes []workspaces.Change
	for _, f := range res.Changed {
		changes = append(changes, workspaces.Change{Path: f.Path, Data: f.Content})
	}
	for _, p := range res.Deleted {
		changes = append(changes, workspaces.Change{Path: p, Delete: true})
	}
	if res.ChangedTruncated || len(res.Skipped) > 0 {
		skipped := make([]string, 0, len(res.Skipped))
		for _, s := range res.Skipped {
			skipped = append(skipped, s.Path+" ("+s.Reason+")")
		}
		out["notKept"] = skipped
		if res.ChangedTruncated {
			out["notKeptNote"] = "more files changed than the sandbox hands back (sandbox.limits.maxFiles, maxBytes); the rest were dropped"
		}
	}
	if len(changes) == 0 {
		return out, nil
	}
	c, err := w.store.Commit(ctx, w.accountID, w.name, t.Version, changes, w.author(ctx))
	if err != nil {
		out["notCommitted"] = CommitError(err).Error()
		return out, nil
	}
	paths := make([]string, 0, len(c.Changes))
	for _, pc := range c.Changes {
		paths = append(paths, pc.Change+" "+pc.Path)
		w.seen.Saw(pc.Path, c.Version)
	}
	out["committed"] = map[string]any{"version": c.Version, "changes": paths}
	return out, nil
}

// fetchers bounds the files bash reads from the store at once.
const fetchers = 16

// files reads the files of tree t for a run, several at once: a call waits for the slowest
// read, not for the sum of them.
func (w *workspace) files(ctx context.Context, t *workspaces.Tree) ([]sandbox.File, error) {
	files, blobs := make([]sandbox.File, 0, len(t.Files)), make([]string, 0, len(t.Files))
	for p, e := range t.Files {
		files, blobs = append(files, sandbox.File{Path: p}), append(blobs, e.Blob)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchers)
	for i := range files {
		g.Go(func() error {
			data, err := w.store.Blob(ctx, w.accountID, blobs[i])
			files[i].Content = data
			return err
		})
	}
	return files, g.Wait()
}
