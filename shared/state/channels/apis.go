package channels

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/wire/slack"
	"github.com/agentharness/harness/shared/wire/telegram"
)

// APIs says where the platforms' APIs are: empty, the platforms' own; local stand-ins and tests
// set SLACK_API_URL and TELEGRAM_API_URL.
type APIs struct {
	Slack, Telegram string
}

// Slack and Telegram are a bot's clients.
func (a APIs) SlackClient(botToken string) *slack.Client { return slack.New(a.Slack, botToken, nil) }
func (a APIs) TelegramClient(botToken string) *telegram.Client {
	return telegram.New(a.Telegram, botToken, nil)
}

// Identify asks the platform whose bot a token is (Slack's auth.test, Telegram's getMe); a token
// the platform refuses is *TokenRefusedError.
func (a APIs) Identify(ctx context.Context, typ, botToken string) (Identity, error) {
	switch typ {
	case Slack:
		user, bot, err := a.SlackClient(botToken).AuthTest(ctx)
		var apiErr *slack.APIError
		if errors.As(err, &apiErr) && (apiErr.Code == "invalid_auth" || apiErr.Code == "not_authed" || apiErr.Code == "account_inactive" || apiErr.Code == "token_revoked") {
			return Identity{}, &TokenRefusedError{Reason: apiErr.Code}
		}
		return Identity{BotUserID: user, BotID: bot}, err
	case Telegram:
		me, err := a.TelegramClient(botToken).GetMe(ctx)
		if refused := telegramRefusal(err); refused != nil {
			return Identity{}, refused
		}
		return Identity{BotUserID: fmt.Sprint(me.ID), BotUsername: me.Username}, err
	}
	return Identity{}, fmt.Errorf("no platform %q", typ)
}

// SetWebhook registers url as a Telegram bot's webhook, with secret as its secret token.
func (a APIs) SetWebhook(ctx context.Context, botToken, url, secret string) error {
	err := a.TelegramClient(botToken).SetWebhook(ctx, url, secret)
	if refused := telegramRefusal(err); refused != nil {
		return refused
	}
	return err
}

// telegramRefusal is err as *TokenRefusedError when the Bot API refused the token; nil else.
func telegramRefusal(err error) error {
	var apiErr *telegram.APIError
	if errors.As(err, &apiErr) && (apiErr.Code == 401 || apiErr.Code == 404) {
		return &TokenRefusedError{Reason: apiErr.Description}
	}
	return nil
}
