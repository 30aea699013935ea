// Package channels keeps channel bindings: a chat channel (a Slack app or a Telegram bot) bound
// to one agent of an account. A binding's credentials are sealed at rest apart from the rest of
// it, and its id is the secret part of its webhook URL.
package channels

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/wire/ids"
)

// Binding types.
const (
	Slack    = "slack"
	Telegram = "telegram"
)

// MaxApprovers bounds a binding's approvers.
const MaxApprovers = 50

// Binding is one channel bound to an agent.
type Binding struct {
	// ID is "chb_" and 32 random bytes, base64url: unguessable, since it is the webhook URL's
	// secret part.
	ID        string `json:"bindingId"`
	AccountID string `json:"-"`
	// Type is Slack or Telegram.
	Type    string `json:"type"`
	AgentID string `json:"agentId"`
	// Approvers are the platform user ids who may decide held tool calls (Slack "U…" ids,
	// Telegram numeric ids as strings); empty: nobody, approvals are denied.
	Approvers []string `json:"approvers"`
	// MentionsOnly: in group chats and public channels the bot answers only messages that
	// mention it (direct messages always).
	MentionsOnly bool `json:"mentionsOnly"`
	// BotUserID, BotID (Slack) and BotUsername (Telegram) identify the bot, to ignore its own
	// messages and find mentions; the caller sets them, from the platform, at create.
	BotUserID   string    `json:"botUserId,omitempty"`
	BotID       string    `json:"botId,omitempty"`
	BotUsername string    `json:"botUsername,omitempty"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// Secrets are sealed at rest, bound to the account and the binding; Get opens them.
	Secrets Secrets `json:"-"`
}

// Secrets are a binding's credentials. Their JSON is how they are sealed, and, redacted, how the
// API shows which are set.
type Secrets struct {
	BotToken string `json:"botToken,omitempty"`
	// SigningSecret (Slack) verifies the signature of Slack's requests.
	SigningSecret string `json:"signingSecret,omitempty"`
	// WebhookSecret (Telegram) is the secret_token given to setWebhook, which Telegram sends back
	// with each update; the harness generates it.
	WebhookSecret string `json:"webhookSecret,omitempty"`
}

// Identity is the bot a token belongs to, as the platform tells it (Slack's auth.test,
// Telegram's getMe).
type Identity struct {
	BotUserID   string
	BotID       string
	BotUsername string
}

// TokenRefusedError: the platform refused the bot token. Reason is its own word for why (Slack's
// "invalid_auth", Telegram's "Unauthorized").
type TokenRefusedError struct{ Reason string }

func (e *TokenRefusedError) Error() string { return "the platform refused the bot token: " + e.Reason }

var (
	// ErrNotFound: no such binding. Another account's binding is just as absent.
	ErrNotFound = errors.New("channel binding not found")
	// ErrConflict: the binding changed since it was read.
	ErrConflict = errors.New("the channel binding was changed by another request")
)

// InvalidError names the field of a binding that cannot be stored, as the API names it.
type InvalidError struct{ Field, Problem string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Problem }

// Platform is the name of a binding type as people write it ("Slack").
func Platform(typ string) string {
	switch typ {
	case Slack:
		return "Slack"
	case Telegram:
		return "Telegram"
	}
	return typ
}

// WebhookPath is the route of a binding's webhook, below the deployment's public URL.
func WebhookPath(bindingID string) string { return "/channels/" + bindingID }

const idPrefix = "chb_"

// idBytes is the randomness of a binding id, and idLen its length once encoded.
const idBytes = 32

var idLen = len(idPrefix) + base64.RawURLEncoding.EncodedLen(idBytes)

// NewID returns a fresh binding id.
func NewID() string { return idPrefix + random(idBytes) }

// ValidID reports whether id is one NewID could have returned: nothing else is ever looked up.
func ValidID(id string) bool {
	return len(id) == idLen && strings.HasPrefix(id, idPrefix) && base64url.MatchString(id[len(idPrefix):])
}

// NewWebhookSecret returns a fresh secret_token for Telegram's setWebhook: 64 characters of
// A-Z, a-z, 0-9, _ and -, the alphabet Telegram allows.
func NewWebhookSecret() string { return random(48) }

func random(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err)) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// platform is what differs between binding types: the secrets a binding holds (every one
// required, no other allowed) and the shapes of its token and of its users' ids.
type platform struct {
	secrets      []string
	token        *regexp.Regexp
	tokenShape   string
	approver     *regexp.Regexp
	approverHint string
}

var platforms = map[string]platform{
	Slack: {
		secrets:    []string{"botToken", "signingSecret"},
		token:      regexp.MustCompile(`^xoxb-[A-Za-z0-9-]+$`),
		tokenShape: "a Slack bot token (xoxb-…, from the app's OAuth & Permissions page)",
		approver:   regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`), approverHint: "a Slack user id (U… or W…, such as U012AB3CD)",
	},
	Telegram: {
		secrets:    []string{"botToken", "webhookSecret"},
		token:      regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]{35,}$`),
		tokenShape: "a Telegram bot token (<digits>:<35 or more characters>, from @BotFather)",
		approver:   regexp.MustCompile(`^[0-9]+$`), approverHint: "a Telegram user id (digits)",
	},
}

// maxSecretBytes and maxIDBytes bound a secret and a platform user id, far above real ones.
const (
	maxSecretBytes = 1024
	maxIDBytes     = 64
)

var (
	signingSecretRE = regexp.MustCompile(`^[\x21-\x7e]+$`)
	// base64url is the alphabet of binding ids and of Telegram's secret_token.
	base64url = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// field is the secret the API names name.
func (s *Secrets) field(name string) *string {
	switch name {
	case "botToken":
		return &s.BotToken
	case "signingSecret":
		return &s.SigningSecret
	case "webhookSecret":
		return &s.WebhookSecret
	}
	panic("channels: no secret " + name)
}

var secretNames = []string{"botToken", "signingSecret", "webhookSecret"}

// Redacted is what the API shows of b's secrets: the placeholder in each one its type holds.
func Redacted(b Binding) Secrets {
	var out Secrets
	for _, name := range platforms[b.Type].secrets {
		*out.field(name) = agentconfig.Redacted
	}
	return out
}

// Check refuses a binding that cannot be stored, with an *InvalidError naming the field.
func Check(b Binding) error {
	p, ok := platforms[b.Type]
	if !ok {
		return &InvalidError{"type", fmt.Sprintf("must be %q or %q", Slack, Telegram)}
	}
	if b.AgentID == "" {
		return &InvalidError{"agentId", "is required"}
	}
	if problem := ids.Problem(b.AgentID); problem != "" {
		return &InvalidError{"agentId", problem}
	}
	if len(b.Approvers) > MaxApprovers {
		return &InvalidError{"approvers", fmt.Sprintf("has %d ids; at most %d", len(b.Approvers), MaxApprovers)}
	}
	for i, a := range b.Approvers {
		field := fmt.Sprintf("approvers[%d]", i)
		if len(a) > maxIDBytes || !p.approver.MatchString(a) {
			return &InvalidError{field, fmt.Sprintf("%q is not %s", a, p.approverHint)}
		}
		if j := slices.Index(b.Approvers[:i], a); j >= 0 {
			return &InvalidError{field, fmt.Sprintf("repeats approvers[%d]", j)}
		}
	}
	for _, name := range secretNames {
		if err := checkSecret(b, p, name); err != nil {
			return err
		}
	}
	return nil
}

func checkSecret(b Binding, p platform, name string) error {
	v := *b.Secrets.field(name)
	if !slices.Contains(p.secrets, name) {
		if v != "" {
			return &InvalidError{name, "is not a secret of " + Platform(b.Type) + " bindings"}
		}
		return nil
	}
	switch {
	case v == "":
		return &InvalidError{name, "is required"}
	case v == agentconfig.Redacted:
		return &InvalidError{name, "holds the redaction placeholder; send the secret itself"}
	case len(v) > maxSecretBytes:
		return &InvalidError{name, fmt.Sprintf("is %d bytes long; at most %d", len(v), maxSecretBytes)}
	}
	var ok bool
	problem := "must be printable ASCII with no spaces"
	switch name {
	case "botToken":
		ok, problem = p.token.MatchString(v), "must be "+p.tokenShape
	case "signingSecret":
		ok = signingSecretRE.MatchString(v)
	case "webhookSecret":
		ok, problem = base64url.MatchString(v), "must be A-Z, a-z, 0-9, _ and - only"
	}
	if !ok {
		return &InvalidError{name, problem}
	}
	return nil
}
