package channelturn

import (
	"context"
	"fmt"
	"strconv"

	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/wire/slack"
	"github.com/agentharness/harness/shared/wire/telegram"
)

// platform is a binding's chat as a turn's output sees it: messages posted and edited in the
// route's chat and thread (text in Markdown, converted here), a typing indicator, and approval
// prompts with decision buttons.
type platform interface {
	post(ctx context.Context, r Route, markdown string) (id string, err error)
	edit(ctx context.Context, r Route, id, markdown string) error
	typing(ctx context.Context, r Route)
	ask(ctx context.Context, r Route, p prompt) (id string, err error)
	// decided replaces a prompt's buttons with how it was decided.
	decided(ctx context.Context, r Route, id string, p prompt, outcome string) error
	// split cuts Markdown into messages that each fit the platform once converted.
	split(markdown string) []string
}

// prompt is a held call as its approval message shows it.
type prompt struct {
	ApprovalID string
	Tool       string
	// Args are the call's arguments, truncated and with secret-looking values hidden.
	Args string
	Hash string
}

func (p prompt) title() string { return "Approve a call of " + p.Tool + "?" }

// platformOf is the chat of binding b, on the platforms' APIs a.
func platformOf(a channels.APIs, b channels.Binding) (platform, error) {
	switch b.Type {
	case channels.Slack:
		return slackChat{c: a.SlackClient(b.Secrets.BotToken)}, nil
	case channels.Telegram:
		return telegramChat{c: a.TelegramClient(b.Secrets.BotToken)}, nil
	}
	return nil, fmt.Errorf("binding %s has an unknown type %q", b.ID, b.Type)
}

type slackChat struct{ c *slack.Client }

func (s slackChat) post(ctx context.Context, r Route, markdown string) (string, error) {
	return s.c.PostMessage(ctx, slack.Message{Channel: r.Chat, ThreadTS: r.Thread, Text: slack.Mrkdwn(markdown)})
}

func (s slackChat) edit(ctx context.Context, r Route, id, markdown string) error {
	return s.c.UpdateMessage(ctx, r.Chat, id, slack.Message{Channel: r.Chat, Text: slack.Mrkdwn(markdown)})
}

// typing: a Slack bot has no typing indicator outside assistant threads; the growing reply
// shows the turn is alive.
func (slackChat) typing(context.Context, Route) {}

func (s slackChat) ask(ctx context.Context, r Route, p prompt) (string, error) {
	approve, deny := press{true, p.ApprovalID, p.Hash}, press{false, p.ApprovalID, p.Hash}
	return s.c.PostMessage(ctx, slack.Message{Channel: r.Chat, ThreadTS: r.Thread, Text: p.title(),
		Blocks: slack.ApprovalBlocks(p.title(), p.Args, approve.data(), deny.data())})
}

func (s slackChat) decided(ctx context.Context, r Route, id string, p prompt, outcome string) error {
	return s.c.UpdateMessage(ctx, r.Chat, id, slack.Message{Channel: r.Chat, Text: p.title() + " " + outcome,
		Blocks: slack.DecidedBlocks(p.title(), p.Args, outcome)})
}

func (slackChat) split(markdown string) []string { return slack.Split(markdown, slack.MaxText) }

type telegramChat struct{ c *telegram.Client }

// ids are a Telegram route's chat and topic as the Bot API takes them.
func (telegramChat) ids(r Route) (chat int64, thread int, err error) {
	if chat, err = strconv.ParseInt(r.Chat, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("telegram chat id %q: %w", r.Chat, err)
	}
	if r.Thread != "" {
		if thread, err = strconv.Atoi(r.Thread); err != nil {
			return 0, 0, fmt.Errorf("telegram topic id %q: %w", r.Thread, err)
		}
	}
	return chat, thread, nil
}

func (t telegramChat) send(ctx context.Context, r Route, m telegram.Message) (string, error) {
	chat, thread, err := t.ids(r)
	if err != nil {
		return "", err
	}
	m.ChatID, m.ThreadID, m.ParseMode = chat, thread, "HTML"
	id, err := t.c.SendMessage(ctx, m)
	return strconv.Itoa(id), err
}

func (t telegramChat) update(ctx context.Context, r Route, id string, m telegram.Message) error {
	chat, _, err := t.ids(r)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(id)
	if err != nil {
		return fmt.Errorf("telegram message id %q: %w", id, err)
	}
	m.ChatID, m.ParseMode = chat, "HTML"
	return t.c.EditMessageText(ctx, chat, n, m)
}

func (t telegramChat) post(ctx context.Context, r Route, markdown string) (string, error) {
	return t.send(ctx, r, telegram.Message{Text: telegram.HTML(markdown)})
}

func (t telegramChat) edit(ctx context.Context, r Route, id, markdown string) error {
	return t.update(ctx, r, id, telegram.Message{Text: telegram.HTML(markdown)})
}

func (t telegramChat) typing(ctx context.Context, r Route) {
	if chat, thread, err := t.ids(r); err == nil {
		_ = t.c.SendChatAction(ctx, chat, thread, "typing") // a hint: nothing waits on it
	}
}

// promptText is a prompt's message in Markdown, for the platforms that take text only.
func promptText(p prompt, outcome string) string {
	text := "**" + p.title() + "**\n```\n" + p.Args + "\n```"
	if outcome != "" {
		text += "\n" + outcome
	}
	return text
}

func (t telegramChat) ask(ctx context.Context, r Route, p prompt) (string, error) {
	approve, deny := press{true, p.ApprovalID, p.Hash}, press{false, p.ApprovalID, p.Hash}
	return t.send(ctx, r, telegram.Message{Text: telegram.HTML(promptText(p, "")), Keyboard: telegram.ApprovalKeyboard(approve.data(), deny.data())})
}

func (t telegramChat) decided(ctx context.Context, r Route, id string, p prompt, outcome string) error {
	return t.update(ctx, r, id, telegram.Message{Text: telegram.HTML(promptText(p, outcome))})
}

func (telegramChat) split(markdown string) []string {
	return telegram.Split(markdown, telegram.MaxText)
}
