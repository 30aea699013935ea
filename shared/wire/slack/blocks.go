package slack

import (
	"strings"
	"unicode/utf8"
)

// Block is a Block Kit layout block, with only what the harness posts: a section (Text), a
// context (Elements are texts) or an actions block (Elements are buttons).
type Block struct {
	Type     string    `json:"type"`
	Text     *Text     `json:"text,omitempty"`
	Elements []Element `json:"elements,omitempty"`
}

// Text is a text object: Type is mrkdwn or plain_text.
type Text struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Element is a context block's text (Type mrkdwn or plain_text) or an actions block's button
// (Type button, Text its label, Style primary or danger).
type Element struct {
	Type     string
	Text     string
	ActionID string
	Value    string
	Style    string
}

// MarshalJSON writes a text element as a text object and a button with its label as one.
func (e Element) MarshalJSON() ([]byte, error) {
	if e.Type != "button" {
		return marshal(Text{Type: e.Type, Text: e.Text})
	}
	return marshal(struct {
		Type     string `json:"type"`
		Text     Text   `json:"text"`
		ActionID string `json:"action_id"`
		Value    string `json:"value,omitempty"`
		Style    string `json:"style,omitempty"`
	}{e.Type, Text{Type: "plain_text", Text: e.Text}, e.ActionID, e.Value, e.Style})
}

// ActionValue is what a button hands back in its block_actions payload, at most MaxActionValue
// characters (Slack refuses the message otherwise).
type ActionValue = string

// Slack's limits on what the harness posts.
const (
	// MaxText is a section block's text limit; a longer answer is posted as several messages.
	MaxText = 3000
	// MaxActionValue is a button value's limit.
	MaxActionValue = 2000
)

// The action ids of the approval buttons.
const (
	ActionApprove = "approve"
	ActionDeny    = "deny"
)

// ApprovalBlocks is a message asking to approve something: a section with the title (mrkdwn) and
// the detail as a code block, and Approve and Deny buttons handing back the given values.
func ApprovalBlocks(title, detail string, approve, deny ActionValue) []Block {
	return []Block{
		approvalSection(title, detail),
		{Type: "actions", Elements: []Element{
			{Type: "button", Text: "Approve", ActionID: ActionApprove, Value: approve, Style: "primary"},
			{Type: "button", Text: "Deny", ActionID: ActionDeny, Value: deny, Style: "danger"},
		}},
	}
}

// DecidedBlocks is the same message once decided: the buttons give way to a context line with
// the outcome (mrkdwn: who decided and when).
func DecidedBlocks(title, detail, outcome string) []Block {
	return []Block{
		approvalSection(title, detail),
		{Type: "context", Elements: []Element{{Type: "mrkdwn", Text: outcome}}},
	}
}

// approvalSection is the title over the detail in a code block, the detail escaped, kept from
// closing the block early, and cut so the section stays within MaxText.
func approvalSection(title, detail string) Block {
	text := title
	if detail != "" {
		code := Escape(strings.ReplaceAll(detail, "```", "``\u200b`"))
		room := MaxText - utf8.RuneCountInString(title) - len("\n```\n\n```")
		text += "\n```\n" + truncate(code, room) + "\n```"
	}
	return Block{Type: "section", Text: &Text{Type: "mrkdwn", Text: text}}
}

// truncate cuts s to at most n runes, the last of them an ellipsis when it cuts, and never
// inside an entity Escape wrote.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	cut := runeOffset(s, n-1)
	cut = entitySafe(s, cut)
	return s[:cut] + "…"
}

// runeOffset is the byte offset of the n-th rune of s, or len(s).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
