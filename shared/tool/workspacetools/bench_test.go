package workspacetools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/toolset"
	"github.com/agentharness/harness/shared/tool/workspacetools"
)

// BenchmarkBashInAWorkspace is one bash call ("true") of a warm function over a workspace of
// 200 files of 4 KiB, as a turn's second and later calls make it: the files are read from S3 (the
// emulator) into the run, which bubblewrap runs, and nothing changes.
func BenchmarkBashInAWorkspace(b *testing.B) {
	ctx := context.Background()
	stack := testenv.Stack(b)
	st, err := workspaces.FromConfig(stack.DB, stack.S3, workspaces.Config{Table: stack.Name("WorkspacesTable"), Bucket: stack.Name("WorkspacesBucket")})
	if err != nil {
		b.Fatal(err)
	}
	ws := fmt.Sprintf("bench-%d", os.Getpid())
	if _, err := st.Create(ctx, account, ws); err != nil {
		b.Fatal(err)
	}
	var changes []workspaces.Change
	for i := range 200 {
		changes = append(changes, workspaces.Change{Path: fmt.Sprintf("src/file%03d.txt", i), Data: []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 512))})
	}
	if _, err := st.Commit(ctx, account, ws, 0, changes, workspaces.Author{Kind: workspaces.ByAPI}); err != nil {
		b.Fatal(err)
	}
	cfg, err := agentconfig.Parse([]byte(`{"name":"a","model":{"provider":"scripted"},"sandbox":{},"workspaces":[{"name":"` + ws + `","permissionMode":"unrestricted"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	o, err := workspacetools.New(st, &sandbox.Local{Bwrap: os.Getenv("HARNESS_BWRAP")}).Offer(ctx, toolset.Build{AccountID: account, AgentID: "agt_1", Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	set, err := tool.NewSet(o.Tools...)
	if err != nil {
		b.Fatal(err)
	}
	run := func() {
		c, err := set.Prepare("bash", json.RawMessage(`{"command":"true"}`))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Run(tool.WithTurn(tool.WithCallID(ctx, "call_bench"), thread("conv_bench"))); err != nil {
			b.Fatal(err)
		}
	}
	run() // the first call of the function
	b.ResetTimer()
	for range b.N {
		run()
	}
}
