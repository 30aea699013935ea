package fakeslack_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/agentharness/harness/infra/fakeslack"
	"github.com/agentharness/harness/shared/wire/slack"
)

// The harness's client posts to the stand-in as to Slack; the stand-in keeps the message as its
// channel shows it after the update, and records each call with what it answered.
func ExampleServer() {
	fake := fakeslack.New(&fakeslack.Options{BotToken: "xoxb-test"})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := slack.New(srv.URL+"/api", "xoxb-test", nil)
	ctx := context.Background()

	ts, _ := c.PostMessage(ctx, slack.Message{Channel: "C1", ThreadTS: "1700000000.000001", Text: "Thinking…"})
	c.UpdateMessage(ctx, "C1", ts, slack.Message{Text: slack.Mrkdwn("It is **3 pm** in [Paris](https://time.is/Paris).")})
	err := c.UpdateMessage(ctx, "C1", "1600000000.000000", slack.Message{Text: "lost"})
	fmt.Println(err)

	for _, m := range fake.Messages("C1") {
		fmt.Printf("%s in %s: %s\n", m.TS, m.ThreadTS, m.Text)
	}
	for _, call := range fake.Calls() {
		fmt.Println(call.Method, call.Status, call.Error, string(call.Body))
	}
	// Output:
	// slack chat.update: message_not_found
	// 1700000000.000100 in 1700000000.000001: It is *3 pm* in <https://time.is/Paris|Paris>.
	// chat.postMessage 200  {"channel":"C1","thread_ts":"1700000000.000001","text":"Thinking…"}
	// chat.update 200  {"channel":"C1","ts":"1700000000.000100","text":"It is *3 pm* in <https://time.is/Paris|Paris>.","blocks":[]}
	// chat.update 200 message_not_found {"channel":"C1","ts":"1600000000.000000","text":"lost","blocks":[]}
}
