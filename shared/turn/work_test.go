package turn_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/turn"
)

// Work queued by the release before named a WebSocket or channel turn's edge by the field that
// carried its route; messages in flight during a deploy still run on the edge they came from.
func TestWorkReadsTheShapeQueuedBefore(t *testing.T) {
	for _, tt := range []struct {
		file, edge, route, event string
	}{
		{"ws-v1.json", "ws", `"allowlist":["grep"]`, "evt_ws_1"},
		{"channel-v1.json", "channel", `"chat":"C1"`, "evt_ch_1"},
		{"async-v1.json", "", "", "evt_1"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "work", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var w turn.Work
			if err := json.Unmarshal(b, &w); err != nil {
				t.Fatal(err)
			}
			if w.Edge != tt.edge || !strings.Contains(string(w.Route), tt.route) || (tt.route == "" && w.Route != nil) {
				t.Errorf("edge %q route %s, want %q with %s", w.Edge, w.Route, tt.edge, tt.route)
			}
			if w.EventID != tt.event || w.Request == nil || w.Request.EventID != tt.event || w.Message == nil || w.Message.Text() != "hi" || w.GroupSeed == "" {
				t.Errorf("the rest of the work was not read: %+v", w)
			}
		})
	}
}

func TestWorkRoundTripsAnEdgeAndItsRoute(t *testing.T) {
	in := turn.Work{Type: "turn", AccountID: "acc_1", EventID: "evt_1", Edge: "channel", Route: json.RawMessage(`{"chat":"C1"}`)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"ws"`) || strings.Contains(string(b), `"channel":`) {
		t.Errorf("new work is written in the old shape: %s", b)
	}
	var out turn.Work
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Edge != in.Edge || string(out.Route) != string(in.Route) || out.AccountID != in.AccountID {
		t.Errorf("read back %+v, want %+v", out, in)
	}
}
