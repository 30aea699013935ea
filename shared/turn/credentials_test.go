package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/turn"
)

// A model whose credentials cannot be read (a deployment's secret, an account's sealed key) is
// the operator's problem: the turn fails as an internal error, never as a refusal that would
// show the client what failed (a secret's ARN); a block the agent got wrong is still refused.
func TestModelCredentialsFailInternally(t *testing.T) {
	turns := testenv.NewTurns(t, func(_ *testenv.Turns, o *turn.Options) {
		o.Model = func(_ context.Context, _ string, block json.RawMessage) (agent.Model, error) {
			var b struct{ Model string }
			if json.Unmarshal(block, &b) == nil && b.Model == "m" {
				return nil, fmt.Errorf("%w: OPENAI_API_KEY_SECRET: reading secret arn:aws:secretsmanager:…: AccessDeniedException", model.ErrCredentials)
			}
			return nil, errors.New("model.model: is not a model of this provider")
		}
	})
	turns.Agent("secretive", `{"name":"secretive","model":{"provider":"openai","model":"m"}}`)
	turns.Agent("wrong", `{"name":"wrong","model":{"provider":"openai","model":"x"}}`)
	_, err := turns.Engine.Agent(context.Background(), turns.Account, turn.Request{AgentID: "secretive"}, false)
	var refused *turn.Refusal
	if err == nil || errors.As(err, &refused) || !errors.Is(err, model.ErrCredentials) {
		t.Errorf("unreadable credentials = %v, want an internal error", err)
	}
	if _, err := turns.Engine.Agent(context.Background(), turns.Account, turn.Request{AgentID: "wrong"}, false); !errors.As(err, &refused) || refused.Kind != turn.Invalid {
		t.Errorf("a block the provider refuses = %v, want an Invalid refusal", err)
	}
}
