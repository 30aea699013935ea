package slack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Envelope is an Events API request: a url_verification handshake (Challenge to echo back) or
// an event_callback carrying one Event. Only the fields the harness reads are kept.
type Envelope struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge,omitempty"`
	TeamID    string `json:"team_id,omitempty"`
	APIAppID  string `json:"api_app_id,omitempty"`
	// EventID is the same on Slack's retries of one delivery, so it deduplicates them.
	EventID        string          `json:"event_id,omitempty"`
	EventTime      int64           `json:"event_time,omitempty"`
	Authorizations []Authorization `json:"authorizations,omitempty"`
	Event          *Event          `json:"event,omitempty"`
}

// The envelope types ParseEvent reads.
const (
	URLVerification = "url_verification"
	EventCallback   = "event_callback"
)

// Authorization is an installation the event is visible to.
type Authorization struct {
	TeamID string `json:"team_id"`
	UserID string `json:"user_id"`
	IsBot  bool   `json:"is_bot"`
}

// Event is a message or app_mention event.
type Event struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype,omitempty"`
	User    string `json:"user,omitempty"`
	BotID   string `json:"bot_id,omitempty"`
	Text    string `json:"text"`
	Channel string `json:"channel"`
	// ChannelType is im, channel, group (a private channel) or mpim; app_mention events have
	// none.
	ChannelType string `json:"channel_type,omitempty"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts,omitempty"`
}

// ParseEvent reads an Events API request body. It refuses a body that is not JSON, has no type,
// a url_verification without its challenge, and an event_callback without an event.
func ParseEvent(body []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("slack event: %w", err)
	}
	switch {
	case e.Type == "":
		return nil, errors.New("slack event: no type")
	case e.Type == URLVerification && e.Challenge == "":
		return nil, errors.New("slack event: url_verification without a challenge")
	case e.Type == EventCallback && (e.Event == nil || e.Event.Type == ""):
		return nil, errors.New("slack event: event_callback without an event")
	}
	return &e, nil
}

// FromBot reports whether a bot wrote e: one with a bot_id or of subtype bot_message (another
// app, which the harness never answers, so two bots cannot talk in a loop), or this bot itself,
// by its user id or its bot id.
func (e *Event) FromBot(botUserID, botID string) bool {
	return e.BotID != "" || e.Subtype == "bot_message" ||
		(botUserID != "" && e.User == botUserID) || (botID != "" && e.BotID == botID)
}

// Thread is the thread the reply to e goes in: its thread when it is in one, else e itself for a
// channel message (the reply starts a thread on it), and "" for a direct message outside a
// thread, since a DM is one conversation.
func (e *Event) Thread() string {
	switch {
	case e.ThreadTS != "":
		return e.ThreadTS
	case e.ChannelType == "im":
		return ""
	}
	return e.TS
}

// StripMention removes the mentions of the bot (<@U123>, also <@U123|name>) from text, and the
// space they leave.
func StripMention(text, botUserID string) string {
	if botUserID == "" {
		return strings.TrimSpace(text)
	}
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, "<@"+botUserID)
		if i < 0 {
			break
		}
		after := rest[i+2+len(botUserID):]
		end := strings.IndexByte(after, '>')
		if end < 0 || (end > 0 && after[0] != '|') {
			// Another user whose id starts with the bot's, or no closing bracket.
			b.WriteString(rest[:i+2])
			rest = rest[i+2:]
			continue
		}
		b.WriteString(rest[:i])
		rest = after[end+1:]
		if strings.HasSuffix(b.String(), " ") || b.Len() == 0 {
			rest = strings.TrimLeft(rest, " ")
		}
	}
	b.WriteString(rest)
	return strings.TrimSpace(b.String())
}

// Interaction is an interactivity request: a block_actions payload, sent when a user presses
// one of a message's buttons.
type Interaction struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"user"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	// Message is the message the buttons are on.
	Message struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts,omitempty"`
	} `json:"message"`
	Container   Container `json:"container"`
	ResponseURL string    `json:"response_url"`
	Actions     []Action  `json:"actions"`
}

// BlockActions is the interaction type of a button press.
const BlockActions = "block_actions"

// Container is where the pressed element is.
type Container struct {
	Type        string `json:"type"`
	MessageTS   string `json:"message_ts"`
	ChannelID   string `json:"channel_id"`
	ThreadTS    string `json:"thread_ts,omitempty"`
	IsEphemeral bool   `json:"is_ephemeral"`
}

// Action is one pressed element.
type Action struct {
	ActionID string `json:"action_id"`
	BlockID  string `json:"block_id"`
	Value    string `json:"value"`
}

// ParseInteraction reads an interactivity request body: form-encoded, with the JSON in its
// payload field. It refuses a body without a payload, a payload that is not JSON or has no
// type.
func ParseInteraction(body []byte) (*Interaction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("slack interaction: %w", err)
	}
	payload := form.Get("payload")
	if payload == "" {
		return nil, errors.New("slack interaction: no payload")
	}
	var in Interaction
	if err := json.Unmarshal([]byte(payload), &in); err != nil {
		return nil, fmt.Errorf("slack interaction: %w", err)
	}
	if in.Type == "" {
		return nil, errors.New("slack interaction: no type")
	}
	return &in, nil
}
