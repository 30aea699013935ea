package chathttp_test

import (
	"testing"

	"github.com/agentharness/harness/infra/testenv"
)

// A turn whose body names a key twice is refused with 400 naming the key's path, and nothing
// is written: encoding/json would keep the last value.
func TestDuplicateKeysAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	f.agent(t, f.acc.ID, "helper", helperConfig)

	turns := []struct{ name, body, field string }{
		{"message", `{"agentId":"helper","id":"dupconv","message":"hi","message":"bye"}`, "message"},
		{"AI SDK approval", `{"agentId":"helper","id":"dupconv","messages":[{"id":"a","role":"assistant","parts":[{"type":"tool-x","state":"approval-responded","approval":{"id":"ap","approved":false,"approved":true}}]}]}`,
			"messages[0].parts[0].approval.approved"},
		{"compact approval", `{"agentId":"helper","id":"dupconv","approvals":[{"approvalId":"ap","approved":false,"approved":true}]}`, "approvals[0].approved"},
	}
	for _, tt := range turns {
		t.Run("turn with "+tt.name, func(t *testing.T) {
			status, _, body := f.turn(t, f.secret, tt.body)
			testenv.WantFieldError(t, status, body, tt.field)
		})
	}
	if items := testenv.ConversationItems(t, f.db, f.tables.Conversations, f.acc.ID); len(items) != 0 {
		t.Errorf("refused turns wrote %v", items)
	}
}
