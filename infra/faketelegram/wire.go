package faketelegram

import "encoding/json"

// Response is the body of every answer: {"ok":true,"result":…}, or {"ok":false,"error_code":
// N,"description":"…"} with parameters.retry_after on a 429.
type Response struct {
	OK          bool                `json:"ok"`
	Result      any                 `json:"result,omitempty"`
	ErrorCode   int                 `json:"error_code,omitempty"`
	Description string              `json:"description,omitempty"`
	Parameters  *ResponseParameters `json:"parameters,omitempty"`
}

// ResponseParameters tell a refused caller what to do; the fake sets only RetryAfter.
type ResponseParameters struct {
	RetryAfter int `json:"retry_after"`
}

// Button is an inline keyboard button as the Bot API takes it.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

// textRequest is the body of sendMessage and editMessageText. The fake is a separate reading
// of the wire from the harness's client, so a mistake in one shows against the other.
type textRequest struct {
	ChatID          json.RawMessage `json:"chat_id"`
	MessageID       int             `json:"message_id"`
	InlineMessageID string          `json:"inline_message_id"`
	ThreadID        int             `json:"message_thread_id"`
	Text            string          `json:"text"`
	ParseMode       string          `json:"parse_mode"`
	ReplyMarkup     *keyboard       `json:"reply_markup"`
	ReplyParameters *struct {
		MessageID                int  `json:"message_id"`
		AllowSendingWithoutReply bool `json:"allow_sending_without_reply"`
	} `json:"reply_parameters"`
	ReplyToMessageID int `json:"reply_to_message_id"`
}

type chatActionRequest struct {
	ChatID   json.RawMessage `json:"chat_id"`
	ThreadID int             `json:"message_thread_id"`
	Action   string          `json:"action"`
}

type callbackAnswerRequest struct {
	CallbackQueryID string `json:"callback_query_id"`
	Text            string `json:"text"`
	ShowAlert       bool   `json:"show_alert"`
}

type webhookRequest struct {
	URL                string   `json:"url"`
	SecretToken        string   `json:"secret_token"`
	AllowedUpdates     []string `json:"allowed_updates"`
	DropPendingUpdates bool     `json:"drop_pending_updates"`
}

// wireMessage is the Message object sendMessage and editMessageText answer with. Its text is
// what the message shows (without tags); the fake leaves out entities.
type wireMessage struct {
	MessageID   int       `json:"message_id"`
	ThreadID    int       `json:"message_thread_id,omitempty"`
	From        wireUser  `json:"from"`
	Chat        wireChat  `json:"chat"`
	Date        int64     `json:"date"`
	EditDate    int64     `json:"edit_date,omitempty"`
	Text        string    `json:"text"`
	ReplyMarkup *keyboard `json:"reply_markup,omitempty"`
}

type keyboard struct {
	InlineKeyboard [][]Button `json:"inline_keyboard"`
}

type wireUser struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	Username  string `json:"username,omitempty"`
}

type wireChat struct {
	ID   int64  `json:"id"`
	Type string `json:"type"`
}
