package workspacetools

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/sandbox"
)

// A command runs no longer than its invocation has left, less the time to commit and answer;
// with too little left it does not start.
func TestRequestFitsTheInvocation(t *testing.T) {
	input := json.RawMessage(`{"command":"make"}`)
	req, err := request(context.Background(), input, sandbox.Request{Limits: sandbox.Limits{WallSeconds: 600}})
	if err != nil || req.Limits.WallSeconds != 600 {
		t.Fatalf("no deadline: wall %d, %v; want the agent's 600", req.Limits.WallSeconds, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err = request(ctx, input, sandbox.Request{Limits: sandbox.Limits{WallSeconds: 600}})
	if err != nil || req.Limits.WallSeconds < 1 || req.Limits.WallSeconds > 20 {
		t.Errorf("30 s left: wall %d, %v; want at most 20 (30 less the margin)", req.Limits.WallSeconds, err)
	}
	short, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := request(short, input, sandbox.Request{Limits: sandbox.Limits{}}); err == nil {
		t.Error("5 s left: the command was asked to run, want it refused")
	}
}
