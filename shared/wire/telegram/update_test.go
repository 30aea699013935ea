package telegram_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/agentharness/harness/shared/wire/telegram"
)

const bot = "HarnessBot"

func parseFile(t *testing.T, name string) *telegram.Update {
	t.Helper()
	body, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	u, err := telegram.ParseUpdate(body)
	if err != nil {
		t.Fatalf("ParseUpdate(%s): %v", name, err)
	}
	return u
}

func TestParseUpdate(t *testing.T) {
	tests := []struct {
		file         string
		want         telegram.Update
		thread       int
		mentions     bool
		withoutBotAt string
	}{
		{
			file: "private.json",
			want: telegram.Update{UpdateID: 904315271, Message: &telegram.IncomingMessage{
				MessageID: 17,
				From:      &telegram.User{ID: 7312445901, Username: "ada_l", FirstName: "Ada"},
				Chat:      telegram.Chat{ID: 7312445901, Type: "private"},
				Text:      "What's on my calendar today?",
			}},
			withoutBotAt: "What's on my calendar today?",
		},
		{
			// A reply in a supergroup that is no forum has a thread id that is no topic; the
			// mention's offset counts the emoji before it as two UTF-16 units.
			file: "group_mention.json",
			want: telegram.Update{UpdateID: 904315272, Message: &telegram.IncomingMessage{
				MessageID: 2210,
				From:      &telegram.User{ID: 5123987702, Username: "grace_h", FirstName: "Grace"},
				Chat:      telegram.Chat{ID: -1001987654321, Type: "supergroup"},
				ThreadID:  2204,
				Text:      "👋 @harnessbot what time is it in Tokyo? cc @grace_h",
				Entities:  []telegram.Entity{{Type: "mention", Offset: 3, Length: 11}, {Type: "mention", Offset: 44, Length: 8}},
			}},
			mentions:     true,
			withoutBotAt: "👋 what time is it in Tokyo? cc @grace_h",
		},
		{
			file: "forum_topic.json",
			want: telegram.Update{UpdateID: 904315273, Message: &telegram.IncomingMessage{
				MessageID:      381,
				From:           &telegram.User{ID: 5123987702, Username: "grace_h", FirstName: "Grace"},
				Chat:           telegram.Chat{ID: -1002233445566, Type: "supergroup", IsForum: true},
				ThreadID:       42,
				IsTopicMessage: true,
				Text:           "/ask@HarnessBot summarise this topic",
				Entities:       []telegram.Entity{{Type: "bot_command", Offset: 0, Length: 15}},
			}},
			thread:       42,
			mentions:     true,
			withoutBotAt: "/ask summarise this topic",
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u := parseFile(t, tt.file)
			if !reflect.DeepEqual(*u, tt.want) {
				t.Fatalf("ParseUpdate = %+v\nwant %+v", *u.Message, *tt.want.Message)
			}
			if got := u.Message.Thread(); got != tt.thread {
				t.Errorf("Thread() = %d, want %d", got, tt.thread)
			}
			if got := u.Message.Mentions(bot); got != tt.mentions {
				t.Errorf("Mentions(%q) = %v, want %v", bot, got, tt.mentions)
			}
			if got := telegram.StripMention(u.Message.Text, bot); got != tt.withoutBotAt {
				t.Errorf("StripMention = %q, want %q", got, tt.withoutBotAt)
			}
		})
	}
}

func TestParseCallbackQuery(t *testing.T) {
	u := parseFile(t, "callback_query.json")
	want := telegram.Update{UpdateID: 904315274, CallbackQuery: &telegram.CallbackQuery{
		ID:   "4382bfdwdsb323b2d9",
		From: telegram.User{ID: 5123987702, Username: "grace_h", FirstName: "Grace"},
		Message: &telegram.IncomingMessage{
			MessageID:      388,
			From:           &telegram.User{ID: 7012345678, IsBot: true, Username: "HarnessBot", FirstName: "Harness"},
			Chat:           telegram.Chat{ID: -1002233445566, Type: "supergroup", IsForum: true},
			ThreadID:       42,
			IsTopicMessage: true,
			Text:           "send_email wants to run. Approve?",
		},
		Data: "apv:a1b2c3",
	}}
	if !reflect.DeepEqual(*u, want) {
		t.Fatalf("ParseUpdate = %+v\nwant %+v", *u.CallbackQuery, *want.CallbackQuery)
	}
	if got := u.CallbackQuery.Message.Thread(); got != 42 {
		t.Errorf("Thread() = %d, want 42", got)
	}
}

func TestParseUpdateRefusesNonJSON(t *testing.T) {
	for _, body := range []string{"", "not json", `{"update_id":"x"}`} {
		if _, err := telegram.ParseUpdate([]byte(body)); err == nil {
			t.Errorf("ParseUpdate(%q) = nil error", body)
		}
	}
}

func TestMentions(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		entities []telegram.Entity
		want     bool
	}{
		{"mention", "@HarnessBot hi", []telegram.Entity{{"mention", 0, 11}}, true},
		{"any case", "hi @HARNESSBOT", []telegram.Entity{{"mention", 3, 11}}, true},
		{"after astral characters", "𝕏𝕏 @HarnessBot", []telegram.Entity{{"mention", 5, 11}}, true},
		{"offsets in runes are wrong", "𝕏𝕏 @HarnessBot", []telegram.Entity{{"mention", 3, 11}}, false},
		{"another bot", "@HarnessBot2 hi", []telegram.Entity{{"mention", 0, 12}}, false},
		{"command to it", "/help@harnessbot", []telegram.Entity{{"bot_command", 0, 16}}, true},
		{"command to another", "/help@OtherBot", []telegram.Entity{{"bot_command", 0, 14}}, false},
		{"bare command", "/help", []telegram.Entity{{"bot_command", 0, 5}}, false},
		{"text without an entity", "@HarnessBot hi", nil, false},
		{"entity of another type", "@HarnessBot", []telegram.Entity{{"bold", 0, 11}}, false},
		{"entity out of range", "@Harn", []telegram.Entity{{"mention", 0, 11}, {"mention", -1, 3}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &telegram.IncomingMessage{Text: tt.text, Entities: tt.entities}
			if got := m.Mentions("@" + bot); got != tt.want {
				t.Errorf("Mentions = %v, want %v", got, tt.want)
			}
			if got := m.Mentions(bot); got != tt.want {
				t.Errorf("Mentions without @ = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStripMention(t *testing.T) {
	tests := []struct{ in, want string }{
		{"@HarnessBot, what time is it?", "what time is it?"},
		{"@harnessbot: summarise", "summarise"},
		{"what time is it @HarnessBot?", "what time is it?"},
		{"ask @HarnessBot about it", "ask about it"},
		{"line one @HarnessBot\nline two", "line one\nline two"},
		{"@HarnessBot", ""},
		{"@HarnessBot2 and me@HarnessBot.com stay", "@HarnessBot2 and me@HarnessBot.com stay"},
		{"@HarnessBot @HarnessBot twice", "twice"},
	}
	for _, tt := range tests {
		if got := telegram.StripMention(tt.in, bot); got != tt.want {
			t.Errorf("StripMention(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
