package channels_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/state/channels"
)

func telegramBinding() channels.Binding {
	return channels.Binding{AccountID: "acc_a", Type: channels.Telegram, AgentID: "helper", Approvers: []string{"42"},
		Secrets: channels.Secrets{BotToken: telegramToken, WebhookSecret: channels.NewWebhookSecret()}}
}

func TestCheck(t *testing.T) {
	tooMany := make([]string, channels.MaxApprovers+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("U0", i)
	}
	for _, tt := range []struct {
		name  string
		edit  func(*channels.Binding)
		slack bool
		field string // "" when it passes
	}{
		{name: "slack", slack: true},
		{name: "telegram"},
		{name: "unknown type", edit: func(b *channels.Binding) { b.Type = "discord" }, field: "type"},
		{name: "no agent", edit: func(b *channels.Binding) { b.AgentID = "" }, field: "agentId"},
		{name: "agent off the id grammar", edit: func(b *channels.Binding) { b.AgentID = "a#b" }, field: "agentId"},
		{name: "a Telegram id for Slack", slack: true, edit: func(b *channels.Binding) { b.Approvers = []string{"U012AB3CD", "42"} }, field: "approvers[1]"},
		{name: "a Slack id for Telegram", edit: func(b *channels.Binding) { b.Approvers = []string{"U012AB3CD"} }, field: "approvers[0]"},
		{name: "a Slack workspace id", slack: true, edit: func(b *channels.Binding) { b.Approvers = []string{"W012AB3CD"} }},
		{name: "a lower-case Slack id", slack: true, edit: func(b *channels.Binding) { b.Approvers = []string{"u012ab3cd"} }, field: "approvers[0]"},
		{name: "a repeated approver", edit: func(b *channels.Binding) { b.Approvers = []string{"42", "7", "42"} }, field: "approvers[2]"},
		{name: "too many approvers", slack: true, edit: func(b *channels.Binding) { b.Approvers = tooMany }, field: "approvers"},
		{name: "no token", edit: func(b *channels.Binding) { b.Secrets.BotToken = "" }, field: "botToken"},
		{name: "a Slack user token", slack: true, edit: func(b *channels.Binding) { b.Secrets.BotToken = "xoxp-1234-5678" }, field: "botToken"},
		{name: "a Slack token for Telegram", edit: func(b *channels.Binding) { b.Secrets.BotToken = slackToken }, field: "botToken"},
		{name: "a short Telegram token", edit: func(b *channels.Binding) { b.Secrets.BotToken = "123:abc" }, field: "botToken"},
		{name: "a token past the limit", slack: true, edit: func(b *channels.Binding) { b.Secrets.BotToken = "xoxb-" + strings.Repeat("a", 1100) }, field: "botToken"},
		{name: "the placeholder", slack: true, edit: func(b *channels.Binding) { b.Secrets.SigningSecret = "[redacted]" }, field: "signingSecret"},
		{name: "no signing secret", slack: true, edit: func(b *channels.Binding) { b.Secrets.SigningSecret = "" }, field: "signingSecret"},
		{name: "a signing secret with a space", slack: true, edit: func(b *channels.Binding) { b.Secrets.SigningSecret = "a b" }, field: "signingSecret"},
		{name: "a signing secret for Telegram", edit: func(b *channels.Binding) { b.Secrets.SigningSecret = signingSecret }, field: "signingSecret"},
		{name: "a webhook secret for Slack", slack: true, edit: func(b *channels.Binding) { b.Secrets.WebhookSecret = "abc" }, field: "webhookSecret"},
		{name: "no webhook secret", edit: func(b *channels.Binding) { b.Secrets.WebhookSecret = "" }, field: "webhookSecret"},
		{name: "a webhook secret Telegram refuses", edit: func(b *channels.Binding) { b.Secrets.WebhookSecret = "a.b" }, field: "webhookSecret"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := telegramBinding()
			if tt.slack {
				b = slackBinding("acc_a", "helper")
			}
			if tt.edit != nil {
				tt.edit(&b)
			}
			err := channels.Check(b)
			var inv *channels.InvalidError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Check = %v, want it to pass", err)
			case tt.field != "" && (!errors.As(err, &inv) || inv.Field != tt.field):
				t.Errorf("Check = %v, want %s refused", err, tt.field)
			}
		})
	}
}

func TestIDsAndSecrets(t *testing.T) {
	id, other := channels.NewID(), channels.NewID()
	if id == other || !channels.ValidID(id) || !regexp.MustCompile(`^chb_[A-Za-z0-9_-]{43}$`).MatchString(id) {
		t.Errorf("NewID = %q, %q; want two different chb_ ids of 32 random bytes", id, other)
	}
	secret := channels.NewWebhookSecret()
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{64}$`).MatchString(secret) || secret == channels.NewWebhookSecret() {
		t.Errorf("NewWebhookSecret = %q, want 64 random characters of Telegram's alphabet", secret)
	}
	if got := channels.WebhookPath(id); got != "/channels/"+id {
		t.Errorf("WebhookPath = %q", got)
	}
	for b, want := range map[*channels.Binding]channels.Secrets{
		ptr(slackBinding("acc_a", "helper")): {BotToken: "[redacted]", SigningSecret: "[redacted]"},
		ptr(telegramBinding()):               {BotToken: "[redacted]", WebhookSecret: "[redacted]"},
	} {
		if got := channels.Redacted(*b); got != want {
			t.Errorf("Redacted(%s) = %+v, want %+v", b.Type, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
