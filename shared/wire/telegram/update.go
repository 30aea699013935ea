package telegram

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
)

// Update is what a webhook request carries: one of Message or CallbackQuery, the two kinds
// SetWebhook asks for. Only the fields the harness uses are read.
type Update struct {
	UpdateID      int64            `json:"update_id"`
	Message       *IncomingMessage `json:"message,omitempty"`
	CallbackQuery *CallbackQuery   `json:"callback_query,omitempty"`
}

// IncomingMessage is a message the bot received, or the bot's own message a button was on.
type IncomingMessage struct {
	MessageID int   `json:"message_id"`
	From      *User `json:"from,omitempty"`
	Chat      Chat  `json:"chat"`
	// ThreadID is set on topic messages of forums, and on replies in other supergroups too;
	// Thread tells them apart.
	ThreadID       int      `json:"message_thread_id,omitempty"`
	IsTopicMessage bool     `json:"is_topic_message,omitempty"`
	Text           string   `json:"text,omitempty"`
	Entities       []Entity `json:"entities,omitempty"`
}

// Chat is where a message is. Type is "private", "group", "supergroup" or "channel".
type Chat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"`
	IsForum bool   `json:"is_forum,omitempty"`
}

// Entity is a marked span of a message's text: a mention ("@name"), a bot_command, ... Offset
// and Length count UTF-16 code units, not bytes or runes.
type Entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

// CallbackQuery is a press of one of the bot's buttons. Message is the message the button is
// on; nil when Telegram no longer has it.
type CallbackQuery struct {
	ID      string           `json:"id"`
	From    User             `json:"from"`
	Message *IncomingMessage `json:"message,omitempty"`
	Data    string           `json:"data,omitempty"`
}

// ParseUpdate reads a webhook request's body.
func ParseUpdate(body []byte) (*Update, error) {
	var u Update
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, fmt.Errorf("telegram update: %w", err)
	}
	return &u, nil
}

// Thread is the forum topic the message is in, 0 when none. A reply in a supergroup that is
// no forum has a message_thread_id too, which is no topic.
func (m *IncomingMessage) Thread() int {
	if m.IsTopicMessage {
		return m.ThreadID
	}
	return 0
}

// Mentions reports whether the message addresses the bot botUsername: a mention entity of
// "@botUsername" or a command entity "/command@botUsername", in any case.
func (m *IncomingMessage) Mentions(botUsername string) bool {
	name := "@" + strings.TrimPrefix(botUsername, "@")
	if name == "@" {
		return false
	}
	var text []uint16
	for _, e := range m.Entities {
		if e.Type != "mention" && e.Type != "bot_command" {
			continue
		}
		if text == nil {
			text = utf16.Encode([]rune(m.Text))
		}
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(text) {
			continue
		}
		s := string(utf16.Decode(text[e.Offset : e.Offset+e.Length]))
		if e.Type == "mention" && strings.EqualFold(s, name) {
			return true
		}
		if _, to, ok := strings.Cut(s, "@"); e.Type == "bot_command" && ok && strings.EqualFold("@"+to, name) {
			return true
		}
	}
	return false
}

// StripMention removes the mentions of botUsername from text, with a comma or colon right
// after one ("@bot, what time is it?"), and the spaces they leave.
func StripMention(text, botUsername string) string {
	name := strings.TrimPrefix(botUsername, "@")
	if name == "" {
		return strings.TrimSpace(text)
	}
	var b strings.Builder
	for {
		i := indexMention(text, name)
		if i < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(strings.TrimRight(text[:i], " "))
		rest := strings.TrimLeft(text[i+1+len(name):], ",:")
		if b.Len() > 0 && strings.HasPrefix(rest, " ") && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte(' ')
		}
		text = strings.TrimLeft(rest, " ")
	}
	return strings.TrimSpace(b.String())
}

// indexMention is the byte index of the first "@name" in text that is a whole username, on
// its own or ending a command ("/ask@name"): a username is letters, digits and underscores,
// so "@name_2" does not mention "name", nor does the address "me@name.org".
func indexMention(text, name string) int {
	for from := 0; from < len(text); {
		i := strings.Index(text[from:], "@")
		if i < 0 {
			return -1
		}
		i += from
		end := i + 1 + len(name)
		word := i
		for word > 0 && usernameByte(text[word-1]) {
			word--
		}
		own := word == i || (word > 0 && text[word-1] == '/')
		if own && end <= len(text) && strings.EqualFold(text[i+1:end], name) && (end == len(text) || !usernameByte(text[end])) {
			return i
		}
		from = i + 1
	}
	return -1
}

func usernameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
