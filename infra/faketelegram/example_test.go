package faketelegram_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentharness/harness/infra/faketelegram"
)

// A message is sent with buttons and edited when one is pressed; an edit that changes nothing,
// HTML Telegram cannot parse and a wrong token are refused as the Bot API refuses them.
func ExampleServer() {
	s := faketelegram.New(&faketelegram.Options{Token: "123:secret", BotID: 123, BotUsername: "HarnessBot"})
	srv := httptest.NewServer(s)
	defer srv.Close()

	post := func(token, method, body string) faketelegram.Response {
		resp, err := http.Post(srv.URL+"/bot"+token+"/"+method, "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var r faketelegram.Response
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			panic(err)
		}
		return r
	}

	sent := post("123:secret", "sendMessage", `{"chat_id":42,"text":"Run <b>send_email</b>?","parse_mode":"HTML",
		"reply_markup":{"inline_keyboard":[[{"text":"Approve","callback_data":"apv:1"}]]}}`)
	fmt.Println(sent.OK, sent.Result.(map[string]any)["text"])
	edit := `{"chat_id":42,"message_id":1,"text":"<b>send_email</b> approved","parse_mode":"HTML"}`
	fmt.Println(post("123:secret", "editMessageText", edit).OK)
	fmt.Println(post("123:secret", "editMessageText", edit).Description[:36])
	fmt.Println(post("123:secret", "sendMessage", `{"chat_id":42,"text":"<p>x</p>","parse_mode":"HTML"}`).Description)
	fmt.Println(post("123:wrong", "getMe", ``).ErrorCode)

	for _, m := range s.Messages(42) {
		fmt.Printf("%d %q keyboard=%v\n", m.MessageID, m.Text, m.Keyboard)
	}
	fmt.Println(len(s.Calls()), "calls recorded")
	// Output:
	// true Run send_email?
	// true
	// Bad Request: message is not modified
	// Bad Request: can't parse entities: Unsupported start tag "p" at byte offset 0
	// 401
	// 1 "<b>send_email</b> approved" keyboard=[]
	// 5 calls recorded
}
