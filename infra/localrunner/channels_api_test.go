package localrunner_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	accountmanage "github.com/agentharness/harness/functions/account-manage/wire"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/accounts"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/secrets"
)

const (
	slackToken    = "xoxb-1234-5678-AbCdEfGhIjKlMnOp"
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	telegramToken = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw8"
)

// platformCalls records account-manage's calls to the platforms, which it answers as they would:
// a token with "revoked" in it is refused, any other names a bot of its own.
type platformCalls struct {
	mu         sync.Mutex
	identified []string // tokens
	webhooks   []webhookCall
}

type webhookCall struct{ token, url, secret string }

func (p *platformCalls) identify(_ context.Context, typ, token string) (channels.Identity, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.identified = append(p.identified, token)
	switch {
	case strings.Contains(token, "revoked") && typ == channels.Slack:
		return channels.Identity{}, &channels.TokenRefusedError{Reason: "invalid_auth"}
	case strings.Contains(token, "revoked"):
		return channels.Identity{}, &channels.TokenRefusedError{Reason: "Unauthorized"}
	case typ == channels.Slack:
		return channels.Identity{BotUserID: "U0BOT" + strings.ToUpper(token[len(token)-2:]), BotID: "B0BOT"}, nil
	}
	id, _, _ := strings.Cut(token, ":")
	return channels.Identity{BotUserID: id, BotUsername: "helper_bot"}, nil
}

func (p *platformCalls) setWebhook(_ context.Context, token, url, secret string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.webhooks = append(p.webhooks, webhookCall{token, url, secret})
	return nil
}

func (p *platformCalls) calls() ([]string, []webhookCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.identified...), append([]webhookCall(nil), p.webhooks...)
}

// Variants of account-manage a request reaches with ?variant=.
const (
	unknownURL = "?variant=unknown-url" // it knows no public URL
	noChannels = "?variant=no-channels" // it keeps no bindings
)

// channelsRunner serves the stack with account-manage's platform calls answered by the returned
// recorder, and a store on its ChannelsTable that opens what account-manage sealed.
func channelsRunner(t *testing.T) (*httptest.Server, *platformCalls, *channels.Store) {
	t.Helper()
	stack := testenv.Stack(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := map[string]string{"ADMIN_SECRET": adminSecret, "SECRETS_LOCAL_KEY": base64.StdEncoding.EncodeToString(key)}
	opts := stack.Options(func(k string) string { return env[k] })
	calls := &platformCalls{}
	opts.Functions = map[string]localrunner.Constructor{
		"AccountManageFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			o, err := accountmanage.Options(d)
			if err != nil {
				return localrunner.Handlers{}, err
			}
			o.Identify, o.SetWebhook = calls.identify, calls.setWebhook
			variants := map[string]http.Handler{"": accounts.NewFrom(o)}
			unknown, none := o, o
			unknown.ServiceURL, none.Channels = "", nil
			variants["unknown-url"], variants["no-channels"] = accounts.NewFrom(unknown), accounts.NewFrom(none)
			return localrunner.Handlers{HTTP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				variants[r.URL.Query().Get("variant")].ServeHTTP(w, r)
			})}, nil
		},
	}
	_, srv := testenv.Serve(t, opts)
	box, err := secrets.FromConfig(context.Background(), secrets.Config{LocalKey: env["SECRETS_LOCAL_KEY"]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, calls, channels.New(stack.DB, stack.Name("ChannelsTable"), box)
}

// binding is a binding as the API shows it.
type binding struct {
	BindingID, Type, AgentID        string
	Approvers                       []string
	MentionsOnly                    bool
	BotUserID, BotID, BotUsername   string
	BotToken, SigningSecret         string
	WebhookSecret                   string
	Version                         int64
	Status, WebhookURL, WebhookPath string
	Note                            string
}

func decodeBinding(t *testing.T, what string, res response, status int) binding {
	t.Helper()
	if res.status != status {
		t.Fatalf("%s = %d %s, want %d", what, res.status, res.body, status)
	}
	var b binding
	if err := json.Unmarshal(res.body, &b); err != nil {
		t.Fatalf("%s answered %s: %v", what, res.body, err)
	}
	for _, secret := range []string{slackToken, signingSecret, telegramToken, "AbCdEfGhIjKlMnOp"} {
		if bytes.Contains(res.body, []byte(secret)) {
			t.Errorf("%s answered a secret in clear: %s", what, res.body)
		}
	}
	return b
}

// TestChannelsAPI goes through account-manage's channel binding routes over HTTP: creation with
// the bot's identity learned from the platform, the refusals, listing, reading, rotation by
// PATCH, set-webhook, the status of a binding whose agent is gone, deletion; another account
// gets for each binding the same 404 as for one that does not exist.
func TestChannelsAPI(t *testing.T) {
	ctx := context.Background()
	srv, calls, st := channelsRunner(t)
	_, secret := createAccount(t, srv, "ada")
	_, other := createAccount(t, srv, "eve")
	for _, s := range []string{secret, other} {
		createAgent(t, srv, s, `{"agentId":"helper",`+chatty[1:])
	}

	// What another account gets for a binding that exists nowhere, to compare once it exists.
	absentID := channels.NewID()
	routes := func(id string) map[string][2]string { // what → method, path
		p := "/accounts/me/channels/" + id
		return map[string][2]string{"GET": {http.MethodGet, p}, "PATCH": {http.MethodPatch, p}, "DELETE": {http.MethodDelete, p}, "set-webhook": {http.MethodPost, p + "/set-webhook"}}
	}
	absent := map[string]response{}
	for what, r := range routes(absentID) {
		absent[what] = call(t, srv, r[0], r[1], other, `{"approvers":[]}`)
		if absent[what].status != http.StatusNotFound {
			t.Fatalf("%s of a binding that does not exist = %d %s, want 404", what, absent[what].status, absent[what].body)
		}
	}

	slackBody := `{"type":"slack","agentId":"helper","botToken":"` + slackToken + `","signingSecret":"` + signingSecret + `","approvers":["U012AB3CD"]}`
	sb := decodeBinding(t, "creating a Slack binding", call(t, srv, http.MethodPost, "/accounts/me/channels", secret, slackBody), http.StatusCreated)
	if !channels.ValidID(sb.BindingID) || sb.Type != "slack" || sb.AgentID != "helper" || len(sb.Approvers) != 1 || !sb.MentionsOnly ||
		sb.BotToken != "[redacted]" || sb.SigningSecret != "[redacted]" || sb.WebhookSecret != "" || sb.BotUserID != "U0BOTOP" || sb.BotID != "B0BOT" ||
		sb.Version != 1 || sb.Status != "active" || sb.WebhookURL != srv.URL+"/channels/"+sb.BindingID || sb.WebhookPath != "" {
		t.Errorf("the Slack binding = %+v; want it active, mentions only, secrets redacted, the bot's ids and its webhook URL", sb)
	}
	tb := decodeBinding(t, "creating a Telegram binding", call(t, srv, http.MethodPost, "/accounts/me/channels", secret,
		`{"type":"telegram","agentId":"helper","botToken":"`+telegramToken+`","approvers":["42"],"mentionsOnly":false}`), http.StatusCreated)
	if tb.BotToken != "[redacted]" || tb.SigningSecret != "" || tb.WebhookSecret != "[redacted]" || tb.BotUserID != "123456789" || tb.BotUsername != "helper_bot" || tb.MentionsOnly {
		t.Errorf("the Telegram binding = %+v; want its token and webhook secret redacted, the bot's id and username, mentionsOnly false", tb)
	}
	stored, err := st.Get(ctx, tb.BindingID)
	if err != nil || stored.Secrets.BotToken != telegramToken || len(stored.Secrets.WebhookSecret) != 64 {
		t.Errorf("the stored Telegram binding = %+v, %v; want its token and a generated 64-character webhook secret", stored, err)
	}

	// Refusals name their field and store nothing.
	slackWith := func(k, v string) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(slackBody), &m)
		if v == "" {
			delete(m, k)
		} else {
			m[k] = json.RawMessage(v)
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, tt := range []struct{ name, body, field, says string }{
		{"an unknown type", slackWith("type", `"discord"`), "type", ""},
		{"no agent", slackWith("agentId", ""), "agentId", "is required"},
		{"another account's agent or none", slackWith("agentId", `"ghost"`), "agentId", "names no agent of this account"},
		{"no token", slackWith("botToken", ""), "botToken", "is required"},
		{"a user token", slackWith("botToken", `"xoxp-1234"`), "botToken", "Slack bot token"},
		{"a token Slack refuses", slackWith("botToken", `"xoxb-revoked-1"`), "botToken", "Slack refused the token: invalid_auth"},
		{"the placeholder", slackWith("botToken", `"[redacted]"`), "botToken", "redaction placeholder"},
		{"no signing secret", slackWith("signingSecret", ""), "signingSecret", "is required"},
		{"a bad approver", slackWith("approvers", `["U012AB3CD","eve"]`), "approvers[1]", "Slack user id"},
		{"approvers not a list", slackWith("approvers", `"U012AB3CD"`), "approvers", "an array of strings"},
		{"mentionsOnly not a boolean", slackWith("mentionsOnly", `"yes"`), "mentionsOnly", ""},
		{"an unknown key", slackWith("webhookSecret", `"mine"`), "webhookSecret", "is not a field"},
		{"a signing secret for Telegram", `{"type":"telegram","agentId":"helper","botToken":"` + telegramToken + `","signingSecret":"x"}`, "signingSecret", "not a secret of Telegram"},
		{"a Telegram token off its shape", `{"type":"telegram","agentId":"helper","botToken":"123:short"}`, "botToken", "Telegram bot token"},
		{"a token Telegram refuses", `{"type":"telegram","agentId":"helper","botToken":"123456789:revokedrevokedrevokedrevokedrevoked1"}`, "botToken", "Telegram refused the token: Unauthorized"},
		{"a Slack approver for Telegram", `{"type":"telegram","agentId":"helper","botToken":"` + telegramToken + `","approvers":["U012AB3CD"]}`, "approvers[0]", "Telegram user id"},
	} {
		res := call(t, srv, http.MethodPost, "/accounts/me/channels", secret, tt.body)
		wantField(t, tt.name, res, http.StatusBadRequest, tt.field)
		if !strings.Contains(string(res.body), tt.says) {
			t.Errorf("%s: %s, want it to say %q", tt.name, res.body, tt.says)
		}
	}

	list := call(t, srv, http.MethodGet, "/accounts/me/channels", secret, "")
	var listed struct{ Channels []binding }
	if err := json.Unmarshal(list.body, &listed); err != nil || len(listed.Channels) != 2 || listed.Channels[0].BindingID != sb.BindingID ||
		listed.Channels[1].BindingID != tb.BindingID || listed.Channels[0].SigningSecret != "[redacted]" || listed.Channels[1].WebhookSecret != "[redacted]" || listed.Channels[1].Status != "active" {
		t.Errorf("GET /accounts/me/channels = %d %s, want the two bindings, oldest first, redacted", list.status, list.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/channels", other, ""); res.status != http.StatusOK || string(res.body) != "{\"channels\":[]}\n" {
		t.Errorf("another account's list = %d %s, want no bindings", res.status, res.body)
	}
	slackPath := "/accounts/me/channels/" + sb.BindingID
	if got := decodeBinding(t, "GET the Slack binding", call(t, srv, http.MethodGet, slackPath, secret, ""), http.StatusOK); got.BindingID != sb.BindingID || got.Version != 1 || got.WebhookURL != sb.WebhookURL {
		t.Errorf("GET %s = %+v, want the binding", slackPath, got)
	}

	// PATCH: the placeholder keeps a secret and asks the platform nothing; a new token is
	// rotation, shown to the platform first; a refused one changes nothing.
	identified, _ := calls.calls()
	p := decodeBinding(t, "PATCH keeping the token", call(t, srv, http.MethodPatch, slackPath, secret, `{"botToken":"[redacted]","approvers":["U012AB3CD","W0ABCDEF"],"mentionsOnly":false}`), http.StatusOK)
	if p.Version != 2 || len(p.Approvers) != 2 || p.MentionsOnly {
		t.Errorf("PATCH = %+v, want version 2, two approvers, mentionsOnly false", p)
	}
	if again, _ := calls.calls(); len(again) != len(identified) {
		t.Errorf("a PATCH keeping the token asked the platform about %v", again[len(identified):])
	}
	if b, err := st.Get(ctx, sb.BindingID); err != nil || b.Secrets.BotToken != slackToken || b.Secrets.SigningSecret != signingSecret {
		t.Errorf("after a PATCH keeping the secrets the binding holds %+v, %v", b.Secrets, err)
	}
	p = decodeBinding(t, "PATCH rotating", call(t, srv, http.MethodPatch, slackPath, secret, `{"botToken":"xoxb-9999-rotated-ZZ","signingSecret":"fresh-signing-secret","mentionsOnly":null,"approvers":null}`), http.StatusOK)
	if p.Version != 3 || p.BotUserID != "U0BOTZZ" || !p.MentionsOnly || len(p.Approvers) != 0 || p.BotToken != "[redacted]" {
		t.Errorf("the rotating PATCH = %+v, want version 3, the new token's bot, mentionsOnly and approvers reset", p)
	}
	if b, err := st.Get(ctx, sb.BindingID); err != nil || b.Secrets.BotToken != "xoxb-9999-rotated-ZZ" || b.Secrets.SigningSecret != "fresh-signing-secret" {
		t.Errorf("after rotation the binding holds %+v, %v", b.Secrets, err)
	}
	for _, tt := range []struct{ name, body, field string }{
		{"a refused token", `{"botToken":"xoxb-revoked-2"}`, "botToken"},
		{"another type", `{"type":"telegram"}`, "type"},
		{"an unknown agent", `{"agentId":"ghost"}`, "agentId"},
		{"no token", `{"botToken":null}`, "botToken"},
		{"an unknown key", `{"status":"active"}`, "status"},
	} {
		wantField(t, "PATCH with "+tt.name, call(t, srv, http.MethodPatch, slackPath, secret, tt.body), http.StatusBadRequest, tt.field)
	}
	if b, err := st.Get(ctx, sb.BindingID); err != nil || b.Version != 3 || b.Secrets.BotToken != "xoxb-9999-rotated-ZZ" {
		t.Errorf("after refused PATCHes the binding is %+v, %v; want version 3 unchanged", b, err)
	}

	// set-webhook: Telegram's gets a fresh secret, stored, and given to Telegram with its URL.
	telegramPath := "/accounts/me/channels/" + tb.BindingID
	if res := call(t, srv, http.MethodPost, slackPath+"/set-webhook", secret, ""); res.status != http.StatusBadRequest || !strings.Contains(string(res.body), "Slack app takes its request URL in its own configuration") {
		t.Errorf("set-webhook of a Slack binding = %d %s, want 400 saying Slack's URL is set in the app", res.status, res.body)
	}
	previous := stored.Secrets.WebhookSecret
	for i := range 2 {
		decodeBinding(t, "set-webhook", call(t, srv, http.MethodPost, telegramPath+"/set-webhook", secret, ""), http.StatusOK)
		_, hooks := calls.calls()
		b, err := st.Get(ctx, tb.BindingID)
		if err != nil || len(hooks) != i+1 {
			t.Fatalf("after set-webhook %d: %v, Telegram called %d times", i+1, err, len(hooks))
		}
		h := hooks[i]
		if h.token != telegramToken || h.url != srv.URL+"/channels/"+tb.BindingID || h.secret != b.Secrets.WebhookSecret || h.secret == previous || len(h.secret) != 64 {
			t.Errorf("set-webhook %d told Telegram %+v, want its token, URL and a fresh secret, the one stored (%q, previously %q)", i+1, h, b.Secrets.WebhookSecret, previous)
		}
		previous = h.secret
	}

	// A deployment that does not know its public URL says so.
	u := decodeBinding(t, "creating without a public URL", call(t, srv, http.MethodPost, "/accounts/me/channels"+unknownURL, secret,
		`{"type":"telegram","agentId":"helper","botToken":"`+telegramToken+`"}`), http.StatusCreated)
	if u.WebhookURL != "" || u.WebhookPath != "/channels/"+u.BindingID || !strings.Contains(u.Note, "AGENT_SERVICE_URL") {
		t.Errorf("a binding without a public URL = %+v, want webhookPath and a note saying why", u)
	}
	if res := call(t, srv, http.MethodPost, telegramPath+"/set-webhook"+unknownURL, secret, ""); res.status != http.StatusBadRequest || !strings.Contains(string(res.body), "public URL is unknown") {
		t.Errorf("set-webhook without a public URL = %d %s, want 400 saying the public URL is unknown", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/channels"+noChannels, secret, ""); res.status != http.StatusNotImplemented {
		t.Errorf("a deployment without CHANNELS_TABLE: GET = %d %s, want 501", res.status, res.body)
	}

	// Another account gets, for each route of the first's binding, what it gets for none; so
	// does an id off the binding id grammar.
	for _, id := range []string{sb.BindingID, tb.BindingID, "chb_x", "helper"} {
		for what, r := range routes(id) {
			if got := call(t, srv, r[0], r[1], other, `{"approvers":[]}`); got.status != absent[what].status || !bytes.Equal(got.body, absent[what].body) {
				t.Errorf("another account's %s of %s = %d %s, want what it gets for no binding: %d %s", what, id, got.status, got.body, absent[what].status, absent[what].body)
			}
		}
	}
	if b, err := st.Get(ctx, sb.BindingID); err != nil || b.Version != 3 {
		t.Errorf("another account's PATCH and DELETE changed the binding: %+v, %v", b, err)
	}

	// Deleting the agent disables its bindings at once.
	if res := call(t, srv, http.MethodDelete, "/accounts/me/agents/helper", secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("deleting the agent = %d %s", res.status, res.body)
	}
	if got := decodeBinding(t, "GET with the agent gone", call(t, srv, http.MethodGet, slackPath, secret, ""), http.StatusOK); got.Status != "disabled: agent helper no longer exists; PATCH agentId to bind another" {
		t.Errorf("with its agent deleted the binding's status is %q, want disabled", got.Status)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/channels", secret, ""); strings.Count(string(res.body), `"status":"disabled: agent helper`) != 3 {
		t.Errorf("with the agent deleted the list = %s, want its three bindings disabled", res.body)
	}
	createAgent(t, srv, secret, `{"agentId":"helper",`+chatty[1:])
	if got := decodeBinding(t, "GET with the agent back", call(t, srv, http.MethodGet, slackPath, secret, ""), http.StatusOK); got.Status != "active" {
		t.Errorf("with an agent of its id again the binding's status is %q, want active", got.Status)
	}

	if res := call(t, srv, http.MethodDelete, slackPath, secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE %s = %d %s, want 204", slackPath, res.status, res.body)
	}
	for what, r := range routes(sb.BindingID) {
		if got := call(t, srv, r[0], r[1], secret, `{"approvers":[]}`); got.status != http.StatusNotFound || !bytes.Equal(got.body, absent[what].body) {
			t.Errorf("%s of the deleted binding = %d %s, want 404 %s", what, got.status, got.body, absent[what].body)
		}
	}
}
