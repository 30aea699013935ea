package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/fakeslack"
	"github.com/agentharness/harness/infra/faketelegram"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/channelturn"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/wire/slack"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The credentials the stand-ins accept.
const (
	chSlackToken  = "xoxb-1-harness-test"
	chSlackSecret = "slack-signing-secret"
	chTGToken     = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789"
)

// channelEnv is a runner whose Slack and Telegram APIs are local stand-ins, with an account.
type channelEnv struct {
	*asyncEnv
	slack *fakeslack.Server
	tg    *faketelegram.Server
}

func newChannelEnv(t *testing.T) *channelEnv {
	t.Helper()
	slk := fakeslack.New(&fakeslack.Options{BotToken: chSlackToken, SigningSecret: chSlackSecret})
	tg := faketelegram.New(&faketelegram.Options{Token: chTGToken, BotID: 4242, BotUsername: "harness_bot"})
	slkSrv, tgSrv := httptest.NewServer(slk), httptest.NewServer(tg)
	t.Cleanup(slkSrv.Close)
	t.Cleanup(tgSrv.Close)
	e := newAsyncEnvOn(t, testenv.Stack(t), func(o *localrunner.Options) {
		base := o.Getenv
		o.Getenv = func(k string) string {
			switch k {
			case "SLACK_API_URL":
				return slkSrv.URL + "/api"
			case "TELEGRAM_API_URL":
				return tgSrv.URL
			}
			return base(k)
		}
	})
	return &channelEnv{asyncEnv: e, slack: slk, tg: tg}
}

// bind binds a channel of typ to agentID with approvers and returns the binding's id and its
// webhook secret (Telegram's, read back from the stand-in's setWebhook).
func (e *channelEnv) bind(t *testing.T, typ, agentID string, approvers ...string) string {
	t.Helper()
	body := map[string]any{"type": typ, "agentId": agentID, "approvers": approvers}
	if typ == "slack" {
		body["botToken"], body["signingSecret"] = chSlackToken, chSlackSecret
	} else {
		body["botToken"] = chTGToken
	}
	raw, _ := json.Marshal(body)
	res := call(t, e.srv, http.MethodPost, "/accounts/me/channels", e.secret, string(raw))
	if res.status != http.StatusCreated {
		t.Fatalf("binding %s = %d %s, want 201", typ, res.status, res.body)
	}
	id, _ := res.json(t)["bindingId"].(string)
	if typ == "telegram" {
		if res := call(t, e.srv, http.MethodPost, "/accounts/me/channels/"+id+"/set-webhook", e.secret, ""); res.status != http.StatusOK {
			t.Fatalf("set-webhook = %d %s", res.status, res.body)
		}
	}
	return id
}

// post sends body to the binding's webhook with headers and returns the status and body.
func (e *channelEnv) post(t *testing.T, bindingID, contentType string, body []byte, h http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/channels/"+bindingID, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res.StatusCode, b.String()
}

// slackEvent posts a signed Events API message event.
func (e *channelEnv) slackEvent(t *testing.T, bindingID, eventID, typ, channelType, channel, user, ts, text string, at time.Time) (int, string) {
	t.Helper()
	ev := map[string]any{"type": typ, "user": user, "text": text, "channel": channel, "ts": ts}
	if channelType != "" {
		ev["channel_type"] = channelType
	}
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T0FAKE", "event_id": eventID, "event_time": at.Unix(), "event": ev})
	return e.post(t, bindingID, "application/json", body, slack.Sign(chSlackSecret, body, at))
}

// slackPress posts a signed block_actions press of the button value by user on the message ts.
func (e *channelEnv) slackPress(t *testing.T, bindingID, user, channel, ts, thread, value string) int {
	t.Helper()
	status, _ := e.slackPressAnswer(t, bindingID, user, channel, ts, thread, value)
	return status
}

// slackPressAnswer is slackPress, returning the answer's body too.
func (e *channelEnv) slackPressAnswer(t *testing.T, bindingID, user, channel, ts, thread, value string) (int, string) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]any{"id": user, "username": strings.ToLower(user)},
		"channel": map[string]any{"id": channel}, "message": map[string]any{"ts": ts, "thread_ts": thread},
		"container": map[string]any{"type": "message", "message_ts": ts, "channel_id": channel},
		"actions":   []any{map[string]any{"action_id": "approve", "block_id": "decide", "value": value}}})
	body := []byte("payload=" + url.QueryEscape(string(payload)))
	return e.post(t, bindingID, "application/x-www-form-urlencoded", body, slack.Sign(chSlackSecret, body, time.Now()))
}

// until waits for cond, failing with what after asyncWait.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(asyncWait); !cond(); time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// slackText is what a channel shows: its messages' texts, in order.
func slackText(s *fakeslack.Server, channel string) string {
	var b strings.Builder
	for _, m := range s.Messages(channel) {
		b.WriteString(m.Text + "\n")
	}
	return b.String()
}

const chattyAgent = `{"name":"chatty","model":{"provider":"scripted","script":[{"text":"Hello from the **agent**."}]}}`

// A Slack DM becomes a turn: the webhook checks the signature, answers at once, and the reply
// is posted in the DM by async-worker. A retried delivery, a bad or stale signature and an
// unknown binding change nothing; Slack's URL check is answered.
func TestASlackMessageIsAnsweredInItsChat(t *testing.T) {
	e := newChannelEnv(t)
	agentID := e.agent(t, chattyAgent)
	id := e.bind(t, "slack", agentID)

	challenge, _ := json.Marshal(map[string]string{"type": "url_verification", "challenge": "ch4ll3nge"})
	if status, body := e.post(t, id, "application/json", challenge, slack.Sign(chSlackSecret, challenge, time.Now())); status != http.StatusOK || !strings.Contains(body, "ch4ll3nge") {
		t.Errorf("url_verification = %d %s, want the challenge", status, body)
	}

	now := time.Now()
	if status, body := e.slackEvent(t, id, "Ev1", "message", "im", "D1", "U111", "1700000000.000100", "hi there", now); status != http.StatusOK {
		t.Fatalf("the event = %d %s, want 200", status, body)
	}
	until(t, "the reply in the DM", func() bool { return strings.Contains(slackText(e.slack, "D1"), "Hello from the *agent*.") })

	// Slack's retry of the same event, a forged one, a stale one, another binding's.
	if status, _ := e.slackEvent(t, id, "Ev1", "message", "im", "D1", "U111", "1700000000.000100", "hi there", time.Now()); status != http.StatusOK {
		t.Errorf("a retried event = %d, want 200", status)
	}
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "event_id": "Ev9", "event": map[string]any{"type": "message", "channel_type": "im", "channel": "D1", "user": "U111", "text": "forged", "ts": "1.2"}})
	if status, _ := e.post(t, id, "application/json", body, slack.Sign("not-the-secret", body, time.Now())); status != http.StatusUnauthorized {
		t.Errorf("a forged event = %d, want 401", status)
	}
	if status, _ := e.slackEvent(t, id, "Ev8", "message", "im", "D1", "U111", "1.3", "stale", time.Now().Add(-6*time.Minute)); status != http.StatusUnauthorized {
		t.Errorf("a stale event = %d, want 401", status)
	}
	if status, _ := e.post(t, "chb_nothing-here", "application/json", body, slack.Sign(chSlackSecret, body, time.Now())); status != http.StatusNotFound {
		t.Errorf("an unknown binding = %d, want 404", status)
	}
	if status, _ := e.slackEvent(t, id, "Ev2", "message", "im", "D1", "U111", "1700000001.000100", "again", time.Now()); status != http.StatusOK {
		t.Fatal("the second event was refused")
	}
	conv := channelturn.ConversationID(id, agentID, "D1", "")
	until(t, "the second reply", func() bool { return len(e.conversation(t, conv)) == 4 })
	var users []string
	for _, m := range e.conversation(t, conv) {
		if m.Role == model.RoleUser {
			users = append(users, m.Text())
		}
	}
	if fmt.Sprint(users) != "[hi there again]" {
		t.Errorf("the conversation's user messages are %v, want the two delivered once each", users)
	}
}

// cautiousChannelAgent asks for the time, which needs approval.
const cautiousChannelAgent = `{"name":"cautious","model":{"provider":"scripted","script":[
	{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]},
	"tools":{"current_time":{"needsApproval":true}}}`

// A held call is asked about in the thread with Approve and Deny buttons: a press by someone
// who is not an approver is refused to them alone and decides nothing; an approver's press
// resumes the turn, whose answer follows, and the prompt shows who decided; a second press is
// told it is decided already.
func TestASlackApprovalIsDecidedFromItsButtons(t *testing.T) {
	e := newChannelEnv(t)
	agentID := e.agent(t, cautiousChannelAgent)
	id := e.bind(t, "slack", agentID, "U111")
	if status, _ := e.slackEvent(t, id, "Ev1", "app_mention", "", "C1", "U222", "1700000000.000500", "<@"+fakeslack.DefaultBotUserID+"> what time is it?", time.Now()); status != http.StatusOK {
		t.Fatal("the mention was refused")
	}
	var promptTS, approve string
	until(t, "the approval prompt", func() bool {
		for _, m := range e.slack.Messages("C1") {
			if v := buttonValue(m.Blocks, "approve"); v != "" {
				promptTS, approve = m.TS, v
				return m.ThreadTS == "1700000000.000500"
			}
		}
		return false
	})
	if status := e.slackPress(t, id, "U999", "C1", promptTS, "1700000000.000500", approve); status != http.StatusOK {
		t.Fatalf("an outsider's press = %d, want 200", status)
	}
	if !hasEphemeral(e.slack.Messages("C1"), "U999", "may not decide") {
		t.Errorf("the outsider was not told, alone, that they may not decide: %+v", e.slack.Messages("C1"))
	}
	if status := e.slackPress(t, id, "U111", "C1", promptTS, "1700000000.000500", approve); status != http.StatusOK {
		t.Fatalf("the approver's press = %d, want 200", status)
	}
	until(t, "the answer after approval", func() bool { return strings.Contains(slackText(e.slack, "C1"), "It is [") })
	if !strings.Contains(slackText(e.slack, "C1"), "Approved by <@U111>") {
		t.Errorf("the prompt does not show who decided:\n%s", slackText(e.slack, "C1"))
	}
	if status := e.slackPress(t, id, "U111", "C1", promptTS, "1700000000.000500", approve); status != http.StatusOK || !hasEphemeral(e.slack.Messages("C1"), "U111", "decided") {
		t.Errorf("a second press = %d, want 200 and an ephemeral 'already decided'", status)
	}
}

// buttonValue finds the value of the button action_id in a message's blocks.
func buttonValue(blocks json.RawMessage, actionID string) string {
	var bs []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	_ = json.Unmarshal(blocks, &bs)
	for _, b := range bs {
		for _, el := range b.Elements {
			if el.ActionID == actionID {
				return el.Value
			}
		}
	}
	return ""
}

func hasEphemeral(msgs []fakeslack.Message, user, text string) bool {
	for _, m := range msgs {
		if m.User == user && strings.Contains(m.Text, text) {
			return true
		}
	}
	return false
}

// tgUpdate posts a Telegram update with the secret token header.
func (e *channelEnv) tgUpdate(t *testing.T, bindingID, secret string, update map[string]any) int {
	t.Helper()
	body, _ := json.Marshal(update)
	h := http.Header{}
	if secret != "" {
		h.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	status, _ := e.post(t, bindingID, "application/json", body, h)
	return status
}

// tgMessage is an update carrying a private chat's text message.
func tgMessage(updateID int64, chat, from int64, text string) map[string]any {
	return map[string]any{"update_id": updateID, "message": map[string]any{"message_id": updateID, "date": 1700000000, "text": text,
		"from": map[string]any{"id": from, "is_bot": false, "first_name": "Ada", "username": fmt.Sprintf("user%d", from)},
		"chat": map[string]any{"id": chat, "type": "private"}}}
}

// tgText is what a chat shows: its messages' texts, in order.
func tgText(s *faketelegram.Server, chat int64) string {
	var b strings.Builder
	for _, m := range s.Messages(chat) {
		b.WriteString(m.Text + "\n")
	}
	return b.String()
}

// A Telegram message becomes a turn answered in its chat, the webhook checking the secret token
// set at setWebhook; a duplicate update and a wrong or missing token change nothing. A held
// call's buttons work as Slack's: an outsider's press is refused with an alert, an approver's
// resumes the turn and the prompt shows who decided. A reply the Bot API rate-limits still
// arrives, and an answer past Telegram's limit is split.
func TestATelegramChatIsAnswered(t *testing.T) {
	e := newChannelEnv(t)
	long := strings.Repeat("A long answer goes on. ", 250) // about 5,750 characters
	agentID := e.agent(t, `{"name":"long","model":{"provider":"scripted","script":[{"text":"`+long+`"}]}}`)
	id := e.bind(t, "telegram", agentID)
	secret := e.tg.Webhook().SecretToken
	if secret == "" || !strings.HasSuffix(e.tg.Webhook().URL, "/channels/"+id) {
		t.Fatalf("setWebhook set %+v, want the binding's URL and a secret", e.tg.Webhook())
	}
	if status := e.tgUpdate(t, id, "wrong", tgMessage(1, 555, 777, "hi")); status != http.StatusUnauthorized {
		t.Errorf("a wrong secret = %d, want 401", status)
	}
	if status := e.tgUpdate(t, id, "", tgMessage(1, 555, 777, "hi")); status != http.StatusUnauthorized {
		t.Errorf("no secret = %d, want 401", status)
	}
	e.tg.RateLimit("sendMessage", 1, time.Second)
	if status := e.tgUpdate(t, id, secret, tgMessage(1, 555, 777, "hi")); status != http.StatusOK {
		t.Fatalf("the update = %d, want 200", status)
	}
	if status := e.tgUpdate(t, id, secret, tgMessage(1, 555, 777, "hi")); status != http.StatusOK {
		t.Errorf("a duplicate update = %d, want 200", status)
	}
	for deadline := time.Now().Add(asyncWait); strings.Count(strings.Join(strings.Fields(tgText(e.tg, 555)), " "), "A long answer goes on.") != 250; time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			t.Fatalf("the chat shows %q, want the whole answer", tgText(e.tg, 555))
		}
	}
	msgs := e.tg.Messages(555)
	if len(msgs) < 2 {
		t.Errorf("the answer came in %d message(s), want it split under Telegram's limit", len(msgs))
	}
	for _, m := range msgs {
		if n := len([]rune(m.Text)); n > 4096 {
			t.Errorf("a message of %d characters, past Telegram's 4096", n)
		}
	}
	conv := channelturn.ConversationID(id, agentID, "555", "")
	if n := len(e.conversation(t, conv)); n != 2 {
		t.Errorf("the conversation holds %d messages, want the update's once and its answer", n)
	}

	// Approvals from the inline keyboard.
	cautious := e.agent(t, cautiousChannelAgent)
	res := call(t, e.srv, http.MethodPatch, "/accounts/me/channels/"+id, e.secret, `{"agentId":"`+cautious+`","approvers":["777"]}`)
	if res.status != http.StatusOK {
		t.Fatalf("rebinding = %d %s", res.status, res.body)
	}
	if status := e.tgUpdate(t, id, secret, tgMessage(2, 556, 777, "what time is it?")); status != http.StatusOK {
		t.Fatal("the second update was refused")
	}
	var prompt faketelegram.Message
	until(t, "the approval prompt", func() bool {
		for _, m := range e.tg.Messages(556) {
			if len(m.Keyboard) > 0 {
				prompt = m
				return true
			}
		}
		return false
	})
	approve := prompt.Keyboard[0][0].CallbackData
	press := func(updateID, from int64) int {
		return e.tgUpdate(t, id, secret, map[string]any{"update_id": updateID, "callback_query": map[string]any{
			"id": fmt.Sprint("cq", updateID), "data": approve, "from": map[string]any{"id": from, "is_bot": false, "first_name": "Ada", "username": fmt.Sprintf("user%d", from)},
			"message": map[string]any{"message_id": prompt.MessageID, "date": 1700000000, "chat": map[string]any{"id": 556, "type": "private"}}}})
	}
	if status := press(3, 888); status != http.StatusOK {
		t.Fatalf("an outsider's press = %d", status)
	}
	if !calledWith(e.tg.Calls(), "answerCallbackQuery", `"show_alert":true`, "may not decide") {
		t.Errorf("the outsider got no alert: %+v", e.tg.Calls())
	}
	if status := press(4, 777); status != http.StatusOK {
		t.Fatalf("the approver's press = %d", status)
	}
	until(t, "the answer after approval", func() bool { return strings.Contains(tgText(e.tg, 556), "It is [") })
	if !strings.Contains(tgText(e.tg, 556), "Approved by @user777") {
		t.Errorf("the prompt does not show who decided:\n%s", tgText(e.tg, 556))
	}
}

// calledWith reports whether a call of method carries every one of parts in its body.
func calledWith(calls []faketelegram.Call, method string, parts ...string) bool {
	for _, c := range calls {
		if c.Method != method {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(string(c.Body), p)
		}
		if all {
			return true
		}
	}
	return false
}

// A Telegram press of Deny denies the call: the model is told who denied it, and the prompt
// says so.
func TestATelegramDenialFromItsButton(t *testing.T) {
	e := newChannelEnv(t)
	id := e.bind(t, "telegram", e.agent(t, cautiousChannelAgent), "777")
	secret := e.tg.Webhook().SecretToken
	if status := e.tgUpdate(t, id, secret, tgMessage(1, 600, 777, "what time is it?")); status != http.StatusOK {
		t.Fatal("the update was refused")
	}
	var prompt faketelegram.Message
	until(t, "the approval prompt", func() bool {
		for _, m := range e.tg.Messages(600) {
			if len(m.Keyboard) > 0 && len(m.Keyboard[0]) == 2 {
				prompt = m
				return true
			}
		}
		return false
	})
	deny := prompt.Keyboard[0][1].CallbackData
	status := e.tgUpdate(t, id, secret, map[string]any{"update_id": 2, "callback_query": map[string]any{
		"id": "cq2", "data": deny, "from": map[string]any{"id": 777, "is_bot": false, "first_name": "Ada", "username": "ada"},
		"message": map[string]any{"message_id": prompt.MessageID, "date": 1700000000, "chat": map[string]any{"id": 600, "type": "private"}}}})
	if status != http.StatusOK {
		t.Fatalf("the press = %d", status)
	}
	until(t, "the answer after the denial", func() bool { return strings.Contains(tgText(e.tg, 600), "denied by @ada in telegram") })
	if !strings.Contains(tgText(e.tg, 600), "Denied by @ada") {
		t.Errorf("the prompt does not show who denied:\n%s", tgText(e.tg, 600))
	}
}

// An external-dispatch call of a chat turn is completed by the outside worker of
// examples/external-async, and the turn's continuation answers in the chat it came from.
func TestAnExternalDispatchAnswersInTheChat(t *testing.T) {
	e := newChannelEnv(t)
	agentID := e.agent(t, `{"name":"dispatcher","model":{"provider":"scripted","script":[
		{"text":"Handing a job to the worker. ","toolCalls":[{"name":"test_external_async","input":{"echo":"alpha"}}]},
		{"text":"The worker answered {{toolResults}}"}]},
		"tools":{"test_external_async":{"async":true,"execution":"external-dispatch"}}}`)
	id := e.bind(t, "telegram", agentID)
	if status := e.tgUpdate(t, id, e.tg.Webhook().SecretToken, tgMessage(1, 700, 777, "run it")); status != http.StatusOK {
		t.Fatal("the update was refused")
	}
	until(t, "the first reply", func() bool { return strings.Contains(tgText(e.tg, 700), "Handing a job to the worker.") })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	worker := exec.CommandContext(ctx, "go", "run", "./examples/external-async", "-jobs", "1", "-timeout", "60s")
	worker.Dir = testenv.Root(t)
	worker.Env = append(os.Environ(), "HARNESS_URL="+e.srv.URL, "EXTERNAL_JOBS_QUEUE_URL="+e.stack.Queues["ExternalJobsQueue"])
	if out, err := worker.CombinedOutput(); err != nil || !strings.Contains(string(out), "completion answered 200") {
		t.Fatalf("the worker: %v\n%s", err, out)
	}
	until(t, "the continuation's answer in the chat", func() bool {
		return strings.Contains(tgText(e.tg, 700), `The worker answered`) && strings.Contains(tgText(e.tg, 700), "ALPHA")
	})
}

// A press on an approval whose deadline has passed decides nothing: the approver is told, alone,
// and the prompt keeps its buttons. (The test moves the stored deadline, as a clock would.)
func TestAnExpiredApprovalIsNotDecidedFromItsButton(t *testing.T) {
	e := newChannelEnv(t)
	id := e.bind(t, "slack", e.agent(t, cautiousChannelAgent), "U111")
	if status, _ := e.slackEvent(t, id, "Ev1", "message", "im", "D7", "U111", "1700000000.000700", "what time is it?", time.Now()); status != http.StatusOK {
		t.Fatal("the message was refused")
	}
	var promptTS, approve string
	until(t, "the approval prompt", func() bool {
		for _, m := range e.slack.Messages("D7") {
			if v := buttonValue(m.Blocks, "approve"); v != "" {
				promptTS, approve = m.TS, v
				return true
			}
		}
		return false
	})
	approvalID := strings.Split(approve, "|")[1]
	_, err := e.stack.DB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 &e.stack.Tables.Approvals,
		Key:                       map[string]ddbtypes.AttributeValue{"approvalKey": &ddbtypes.AttributeValueMemberS{Value: e.accountID + "#" + approvalID}},
		UpdateExpression:          aws.String("SET deadline = :past"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":past": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(-time.Minute).UnixMilli())}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if status := e.slackPress(t, id, "U111", "D7", promptTS, "", approve); status != http.StatusOK {
		t.Fatalf("the press = %d", status)
	}
	if !hasEphemeral(e.slack.Messages("D7"), "U111", "expired") {
		t.Errorf("the approver was not told the approval expired: %+v", e.slack.Messages("D7"))
	}
	for _, m := range e.slack.Messages("D7") {
		if m.TS == promptTS && buttonValue(m.Blocks, "approve") == "" {
			t.Errorf("the expired prompt lost its buttons: %+v", m)
		}
	}
}

// A same-invocation async call of a chat turn: the model answers over its placeholder, its
// result comes back to the model within the invocation, and both answers are in the chat, each
// step's text a paragraph of its own.
func TestASameInvocationCallAnswersInTheChat(t *testing.T) {
	e := newChannelEnv(t)
	agentID := e.agent(t, `{"name":"background","model":{"provider":"scripted","script":[
		{"text":"Starting. ","toolCalls":[{"name":"test_async","input":{"echo":"beta","delayMs":300}}]},
		{"text":"Got {{toolResults}}"}]},
		"tools":{"test_async":{"async":true,"execution":"same-invocation"}}}`)
	id := e.bind(t, "slack", agentID)
	if status, _ := e.slackEvent(t, id, "Ev1", "message", "im", "D9", "U111", "1700000000.000900", "go", time.Now()); status != http.StatusOK {
		t.Fatal("the message was refused")
	}
	for deadline := time.Now().Add(asyncWait); ; time.Sleep(pollEvery) {
		text := slackText(e.slack, "D9")
		if strings.Contains(text, "test_async: ✓") && strings.Contains(text, `"status":"running"}]`+"\n\nGot [") && strings.Contains(text, `"echo":"beta"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat shows:\n%s\nwant the call running in the background, then its result", text)
		}
	}
}

// A button's approval id follows the id grammar: a press carrying a 3,000-character one (no
// button of the harness's does) is refused with 400 naming the field, before any approval is
// read, on Slack and on Telegram alike, and nothing is said in the chat.
func TestAPressWithAMalformedApprovalIDIsRefused(t *testing.T) {
	e := newChannelEnv(t)
	agentID := e.agent(t, cautiousChannelAgent)
	forged := func(answer string) string { return answer + "|" + strings.Repeat("a", 3000) + "|0123456789ab" }
	refused := func(t *testing.T, status int, body, field string) {
		t.Helper()
		var got struct{ Error, Field string }
		_ = json.Unmarshal([]byte(body), &got)
		if status != http.StatusBadRequest || got.Field != field || !strings.HasPrefix(got.Error, field+": approval id is 3000 characters long") {
			t.Errorf("the press = %d %s, want 400 naming %s", status, body, field)
		}
	}

	t.Run("slack", func(t *testing.T) {
		id := e.bind(t, "slack", agentID, "U111")
		status, body := e.slackPressAnswer(t, id, "U111", "C1", "1700000000.000100", "", forged("y"))
		refused(t, status, body, "actions[0].value")
		if msgs := e.slack.Messages("C1"); len(msgs) != 0 {
			t.Errorf("the chat got %+v, want nothing", msgs)
		}
	})

	t.Run("telegram", func(t *testing.T) {
		id := e.bind(t, "telegram", agentID, "777")
		update, _ := json.Marshal(map[string]any{"update_id": 1, "callback_query": map[string]any{
			"id": "cq1", "data": forged("n"), "from": map[string]any{"id": 777, "is_bot": false, "first_name": "Ada"},
			"message": map[string]any{"message_id": 5, "date": 1700000000, "chat": map[string]any{"id": 800, "type": "private"}}}})
		h := http.Header{}
		h.Set("X-Telegram-Bot-Api-Secret-Token", e.tg.Webhook().SecretToken)
		status, body := e.post(t, id, "application/json", update, h)
		refused(t, status, body, "callback_query.data")
		if calledWith(e.tg.Calls(), "answerCallbackQuery") || len(e.tg.Messages(800)) != 0 {
			t.Errorf("the chat was answered: %+v", e.tg.Calls())
		}
	})
}
