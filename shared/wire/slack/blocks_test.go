package slack_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/wire/slack"
)

func TestApprovalBlocks(t *testing.T) {
	got, err := json.Marshal(slack.ApprovalBlocks("Approve *tavilySearch*?", `{"query":"a < b & c"}`, "apr_1:yes", "apr_1:no"))
	if err != nil {
		t.Fatal(err)
	}
	want := `[` +
		`{"type":"section","text":{"type":"mrkdwn","text":"Approve *tavilySearch*?\n` + "```" + `\n{\"query\":\"a \u0026lt; b \u0026amp; c\"}\n` + "```" + `"}},` +
		`{"type":"actions","elements":[` +
		`{"type":"button","text":{"type":"plain_text","text":"Approve"},"action_id":"approve","value":"apr_1:yes","style":"primary"},` +
		`{"type":"button","text":{"type":"plain_text","text":"Deny"},"action_id":"deny","value":"apr_1:no","style":"danger"}]}]`
	if string(got) != want {
		t.Errorf("ApprovalBlocks =\n%s\nwant\n%s", got, want)
	}
}

func TestDecidedBlocks(t *testing.T) {
	got, err := json.Marshal(slack.DecidedBlocks("Approve *tavilySearch*?", "", "Approved by <@U061F7AUR> at 10:42"))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"section","text":{"type":"mrkdwn","text":"Approve *tavilySearch*?"}},` +
		`{"type":"context","elements":[{"type":"mrkdwn","text":"Approved by \u003c@U061F7AUR\u003e at 10:42"}]}]`
	if string(got) != want {
		t.Errorf("DecidedBlocks =\n%s\nwant\n%s", got, want)
	}
}

// A detail of any length, with fences of its own, stays one closed code block within MaxText,
// and is never cut inside an entity.
func TestApprovalDetailIsBounded(t *testing.T) {
	for _, detail := range []string{
		strings.Repeat("<&>", slack.MaxText),
		strings.Repeat("é", 2*slack.MaxText),
		"```\nrm -rf /\n```",
	} {
		// Titles of 13 lengths, the length of an escaped "<&>", put the cut at every offset in it.
		for k := range 13 {
			section := slack.ApprovalBlocks("Run *shell*"+strings.Repeat("?", k), detail, "a", "d")[0].Text.Text
			if n := utf8.RuneCountInString(section); n > slack.MaxText {
				t.Errorf("section of %d runes, more than %d", n, slack.MaxText)
			}
			if n := strings.Count(section, "```"); n != 2 {
				t.Errorf("section has %d fences, want 2: %q", n, section)
			}
			for i := range section {
				if section[i] == '&' && !strings.HasPrefix(section[i:], "&amp;") && !strings.HasPrefix(section[i:], "&lt;") && !strings.HasPrefix(section[i:], "&gt;") {
					t.Fatalf("section cuts an entity: %q", section[i:])
				}
			}
		}
	}
}
