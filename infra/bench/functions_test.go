package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
)

// The function-level benchmark runs end to end with tiny counts: real bootstraps and the Node
// runtime on the stand-in, against DynamoDB Local and the mock. It fails, never skips, without
// the stack.
func TestFunctionLevel(t *testing.T) {
	testenv.DynamoDB(t) // fails the test when make test's DynamoDB Local is not there
	testenv.SQS(t)
	node := testenv.Node(t)
	root := testenv.Root(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mockURL, stop, err := startMock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	r, err := runFunctions(ctx, root, mockURL, node, fnConfig{turns: 3, longTurns: 5, warmup: 1, coldStarts: 1})
	if err != nil {
		t.Fatalf("runFunctions() = %v", err)
	}
	for _, rt := range []turnRuntime{r.harness, r.node} {
		// VmHWM is the larger of the kernel's recorded peak and the RSS now, and the kernel
		// records a peak only on some paths (an unmap, an exit): a peak that was never recorded
		// reads lower once the RSS falls. So the later reading may be a little lower; a tenth
		// lower would be a measuring fault.
		if rt.initMs <= 0 || rt.firstByteMs < rt.initMs || rt.firstTurnMs < rt.firstByteMs || rt.turns != 3 || rt.longTurns != 5 ||
			rt.p50Ms <= 0 || rt.cpuMsPerTurn < 0 || rt.hwmKB <= 0 || rt.longHWMKB < rt.hwmKB*9/10 {
			t.Errorf("%s = %+v; want init < first byte < first turn, 3 and 5 turns, a latency and two readings of the peak RSS", rt.name, rt)
		}
	}
	if len(r.functions) != 7 {
		t.Errorf("%d functions measured, want template.yaml's 7", len(r.functions))
	}
	for _, f := range r.functions {
		if f.err != nil || f.initMs <= 0 || f.sizeBytes < 1<<20 {
			t.Errorf("%s: init %.1f ms, %d bytes, err %v; want it to start", f.logicalID, f.initMs, f.sizeBytes, f.err)
		}
	}
	var out strings.Builder
	printFunctions(&out, r)
	for _, want := range []string{"| harness-processing (Go bootstrap) |", "(lambda-aisdk.mjs) |", "| Node / harness |", "| harness-processing (HarnessProcessingFunction) |", "| ws-gateway (WsGatewayFunction) |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tables lack %q:\n%s", want, out.String())
		}
	}
}

func TestProcReaders(t *testing.T) {
	cpu, err := procCPU(1) // any live process; pid 1 always is
	if err != nil || cpu < 0 {
		t.Errorf("procCPU(1) = %v, %v", cpu, err)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("procCPU of no process returned no error")
	}
	hwm, err := procHWM(1)
	if err != nil || hwm <= 0 {
		t.Errorf("procHWM(1) = %d, %v", hwm, err)
	}
}
