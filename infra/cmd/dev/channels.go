package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/agentharness/harness/infra/fakeslack"
	"github.com/agentharness/harness/infra/faketelegram"
)

// The stand-ins' credentials and the demo bindings' approvers: fixed, so the printed commands
// read the same run to run. None of them is valid on Slack or Telegram.
const (
	devSlackToken       = "xoxb-0-harness-dev"
	devSlackSecret      = "harness-dev-signing-secret"
	devSlackApprover    = "U0DEVUSER"
	devTelegramBotID    = 1000000001
	devTelegramToken    = "1000000001:harness-dev-telegram-bot-token-0000"
	devTelegramApprover = "1001"
)

// chatAgent is the seeded agent the demo bindings answer with: its test_async call of 2 s waits
// for the user's approval, so a chat shows the prompt and the press.
const chatAgent = "approver"

// chat is a chat platform whose local stand-in make dev serves, bound to chatAgent.
type chat struct {
	typ, name, api string // "slack", "Slack", and the stand-in's URL
	// what the stand-in is, for the printed header.
	about string
	// flags of the example's command besides the webhook, the stand-in and the approver.
	flags    string
	approver string
	// binding is the POST /accounts/me/channels body, less agentId and approvers.
	binding map[string]any
}

// localChats serves the Slack and Telegram stand-ins on free ports, each unless SLACK_API_URL or
// TELEGRAM_API_URL names another API (Slack's own, say), and points the harness at them. It
// returns the chats it serves, a note for each platform it left alone, and how to stop them.
func localChats() (chats []chat, notes string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for _, c := range []struct {
		chat
		env     string
		handler http.Handler
		// suffix is where the API is under the stand-in's URL.
		suffix string
	}{
		{chat{typ: "slack", name: "Slack", about: "the Slack API", flags: " -signing-secret " + devSlackSecret, approver: devSlackApprover,
			binding: map[string]any{"botToken": devSlackToken, "signingSecret": devSlackSecret}},
			"SLACK_API_URL", fakeslack.New(&fakeslack.Options{BotToken: devSlackToken, SigningSecret: devSlackSecret}), "/api"},
		{chat{typ: "telegram", name: "Telegram", about: "the Telegram Bot API", approver: devTelegramApprover,
			binding: map[string]any{"botToken": devTelegramToken}},
			"TELEGRAM_API_URL", faketelegram.New(&faketelegram.Options{Token: devTelegramToken, BotID: devTelegramBotID, BotUsername: "harness_dev_bot"}), ""},
	} {
		if v := os.Getenv(c.env); v != "" {
			notes += fmt.Sprintf("\n%s: %s is %s, so make dev serves no stand-in of it and binds no channel there.\n", c.name, c.env, v)
			continue
		}
		base, stopOne, err := serveLocal(c.handler)
		if err != nil {
			stop()
			return nil, "", nil, fmt.Errorf("starting the local %s stand-in: %w", c.name, err)
		}
		stops = append(stops, stopOne)
		os.Setenv(c.env, base+c.suffix)
		c.api = base
		chats = append(chats, c.chat)
	}
	return chats, notes, stop, nil
}

// bindChats binds each chat to chatAgent through the account API, as an account owner would
// (Telegram's webhook registered too), and returns the command that talks to each.
func bindChats(ctx context.Context, base, secret string, chats []chat) (string, error) {
	var out strings.Builder
	for _, c := range chats {
		body := map[string]any{"type": c.typ, "agentId": chatAgent, "approvers": []string{c.approver}}
		for k, v := range c.binding {
			body[k] = v
		}
		var b struct {
			BindingID  string `json:"bindingId"`
			WebhookURL string `json:"webhookUrl"`
		}
		if err := accountCall(ctx, base+"/accounts/me/channels", secret, body, &b); err != nil {
			return "", fmt.Errorf("binding %s: %w", c.name, err)
		}
		if c.typ == "telegram" {
			if err := accountCall(ctx, base+"/accounts/me/channels/"+b.BindingID+"/set-webhook", secret, nil, nil); err != nil {
				return "", fmt.Errorf("setting the Telegram webhook: %w", err)
			}
		}
		fmt.Fprintf(&out, `
Talk to the %s agent over %s (a local stand-in of %s at %s):

  go run ./examples/channels -platform %s -webhook %s -api %s%s -approver %s -message "Run the nightly build"
`, chatAgent, c.name, c.about, c.api, c.typ, b.WebhookURL, c.api, c.flags, c.approver)
	}
	return out.String(), nil
}

// accountCall POSTs in (JSON) to an account route with the account's secret and decodes the
// answer into out; anything but a 2xx is an error.
func accountCall(ctx context.Context, url, secret string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s = %d %s", url, resp.StatusCode, answer)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}
