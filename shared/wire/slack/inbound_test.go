package slack_test

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/shared/wire/slack"
)

const botUserID, botID = "U0LAN0Z89", "B0LAN0Z90"

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseEvent(t *testing.T) {
	auth := []slack.Authorization{{TeamID: "T061EG9R6", UserID: botUserID, IsBot: true}}
	tests := []struct {
		file       string
		want       *slack.Envelope
		fromBot    bool
		thread     string
		strippedTo string
	}{
		{
			file: "url_verification.json",
			want: &slack.Envelope{Type: slack.URLVerification, Challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
		},
		{
			file: "app_mention.json",
			want: &slack.Envelope{
				Type: slack.EventCallback, TeamID: "T061EG9R6", APIAppID: "A0MDYCDME", EventID: "Ev0LAN670R", EventTime: 1515449522, Authorizations: auth,
				Event: &slack.Event{Type: "app_mention", User: "U061F7AUR", Text: "<@U0LAN0Z89> what is the hour of the pearl?", Channel: "C0LAN2Q65", TS: "1515449522.000016"},
			},
			thread:     "1515449522.000016", // a mention in a channel starts a thread on itself
			strippedTo: "what is the hour of the pearl?",
		},
		{
			file: "message_im.json",
			want: &slack.Envelope{
				Type: slack.EventCallback, TeamID: "T061EG9R6", APIAppID: "A0MDYCDME", EventID: "Ev08MFMKH6", EventTime: 1700000123, Authorizations: auth,
				Event: &slack.Event{Type: "message", User: "U061F7AUR", Text: "Summarise yesterday's incidents, please.", Channel: "D024BE91L", ChannelType: "im", TS: "1700000123.000200"},
			},
			thread:     "", // a DM is one conversation
			strippedTo: "Summarise yesterday's incidents, please.",
		},
		{
			file: "message_thread_reply.json",
			want: &slack.Envelope{
				Type: slack.EventCallback, TeamID: "T061EG9R6", APIAppID: "A0MDYCDME", EventID: "Ev08MFMKJ7", EventTime: 1700000300, Authorizations: auth,
				Event: &slack.Event{Type: "message", User: "U061F7AUR", Text: "And the one before?", Channel: "C0LAN2Q65", ChannelType: "channel", TS: "1700000300.000400", ThreadTS: "1700000100.000100"},
			},
			thread:     "1700000100.000100",
			strippedTo: "And the one before?",
		},
		{
			file: "message_bot.json",
			want: &slack.Envelope{
				Type: slack.EventCallback, TeamID: "T061EG9R6", APIAppID: "A0MDYCDME", EventID: "Ev08MFMKK8", EventTime: 1700000400, Authorizations: auth,
				Event: &slack.Event{Type: "message", Subtype: "bot_message", BotID: "B0OTHER42", Text: "Deploy finished.", Channel: "C0LAN2Q65", ChannelType: "channel", TS: "1700000400.000500"},
			},
			fromBot:    true,
			thread:     "1700000400.000500",
			strippedTo: "Deploy finished.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := slack.ParseEvent(readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("ParseEvent (-want +got):\n%s", diff)
			}
			if got.Event == nil {
				return
			}
			if fb := got.Event.FromBot(botUserID, botID); fb != tt.fromBot {
				t.Errorf("FromBot = %v, want %v", fb, tt.fromBot)
			}
			if th := got.Event.Thread(); th != tt.thread {
				t.Errorf("Thread = %q, want %q", th, tt.thread)
			}
			if s := slack.StripMention(got.Event.Text, botUserID); s != tt.strippedTo {
				t.Errorf("StripMention = %q, want %q", s, tt.strippedTo)
			}
		})
	}
}

func TestParseEventRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":                     `{"type":`,
		"no type":                      `{"challenge":"x"}`,
		"verification, no challenge":   `{"type":"url_verification"}`,
		"callback without its event":   `{"type":"event_callback","event_id":"Ev1"}`,
		"callback with an empty event": `{"type":"event_callback","event":{}}`,
	} {
		if _, err := slack.ParseEvent([]byte(body)); err == nil {
			t.Errorf("%s: ParseEvent(%s) succeeded", name, body)
		}
	}
}

func TestFromBot(t *testing.T) {
	tests := []struct {
		name string
		e    slack.Event
		want bool
	}{
		{"a person", slack.Event{User: "U061F7AUR"}, false},
		{"this bot's user", slack.Event{User: botUserID}, true},
		{"this bot's bot id", slack.Event{BotID: botID}, true},
		{"another app", slack.Event{User: "U0OTHER", BotID: "B0OTHER"}, true},
		{"a bot_message without ids", slack.Event{Subtype: "bot_message"}, true},
		{"a person's edit", slack.Event{Subtype: "message_changed"}, false},
	}
	for _, tt := range tests {
		if got := tt.e.FromBot(botUserID, botID); got != tt.want {
			t.Errorf("%s: FromBot = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestThread(t *testing.T) {
	tests := []struct {
		name string
		e    slack.Event
		want string
	}{
		{"channel message", slack.Event{ChannelType: "channel", TS: "1.1"}, "1.1"},
		{"private channel message", slack.Event{ChannelType: "group", TS: "1.1"}, "1.1"},
		{"group DM", slack.Event{ChannelType: "mpim", TS: "1.1"}, "1.1"},
		{"mention (no channel type)", slack.Event{TS: "1.1"}, "1.1"},
		{"reply in a channel thread", slack.Event{ChannelType: "channel", TS: "2.2", ThreadTS: "1.1"}, "1.1"},
		{"DM", slack.Event{ChannelType: "im", TS: "2.2"}, ""},
		{"reply in a DM thread", slack.Event{ChannelType: "im", TS: "2.2", ThreadTS: "1.1"}, "1.1"},
	}
	for _, tt := range tests {
		if got := tt.e.Thread(); got != tt.want {
			t.Errorf("%s: Thread = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestStripMention(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<@U1> hello", "hello"},
		{"hello <@U1>", "hello"},
		{"hey <@U1> what now", "hey what now"},
		{"<@U1|harness> hi", "hi"},
		{"<@U1><@U1> twice", "twice"},
		{"<@U12> is someone else", "<@U12> is someone else"},
		{"<@U2> and <@U1> ask", "<@U2> and ask"},
		{"no mention", "no mention"},
		{"<@U1", "<@U1"},
	}
	for _, tt := range tests {
		if got := slack.StripMention(tt.in, "U1"); got != tt.want {
			t.Errorf("StripMention(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseInteraction(t *testing.T) {
	body := url.Values{"payload": {string(readTestdata(t, "block_actions.json"))}}.Encode()
	got, err := slack.ParseInteraction([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := &slack.Interaction{
		Type:        slack.BlockActions,
		Container:   slack.Container{Type: "message", MessageTS: "1700000200.000300", ChannelID: "C0LAN2Q65", ThreadTS: "1700000100.000100"},
		ResponseURL: "https://hooks.slack.com/actions/T061EG9R6/1395872398/AbCdEfGhIjKlMnOp",
		Actions:     []slack.Action{{ActionID: slack.ActionApprove, BlockID: "Hr2a", Value: "apr_01HZX3Q8"}},
	}
	want.User.ID, want.User.Username = "U061F7AUR", "ada"
	want.Channel.ID = "C0LAN2Q65"
	want.Message.TS, want.Message.ThreadTS = "1700000200.000300", "1700000100.000100"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseInteraction (-want +got):\n%s", diff)
	}

	for name, body := range map[string]string{
		"no payload":        "foo=bar",
		"payload not JSON":  url.Values{"payload": {"{"}}.Encode(),
		"payload, no type":  url.Values{"payload": {`{"actions":[]}`}}.Encode(),
		"not a form at all": "%zz",
	} {
		if _, err := slack.ParseInteraction([]byte(body)); err == nil {
			t.Errorf("%s: ParseInteraction(%q) succeeded", name, body)
		}
	}
}
