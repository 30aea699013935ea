package telegram

import "fmt"

// MaxCallbackData is the most bytes of callback_data Telegram keeps for a button.
const MaxCallbackData = 64

// InlineKeyboard is the buttons under a message, by rows.
type InlineKeyboard struct {
	Rows [][]Button `json:"inline_keyboard"`
}

// Button is a button whose press posts a callback_query carrying CallbackData.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// ApprovalKeyboard is the two buttons of a held tool call: approve and deny.
func ApprovalKeyboard(approveData, denyData string) *InlineKeyboard {
	return &InlineKeyboard{Rows: [][]Button{{
		{Text: "✅ Approve", CallbackData: approveData},
		{Text: "❌ Deny", CallbackData: denyData},
	}}}
}

// Check refuses a keyboard Telegram would: a button without text, or whose callback data is
// empty or over MaxCallbackData bytes. A nil keyboard is none and passes.
func (k *InlineKeyboard) Check() error {
	if k == nil {
		return nil
	}
	for _, row := range k.Rows {
		for _, b := range row {
			switch {
			case b.Text == "":
				return fmt.Errorf("a button has no text")
			case b.CallbackData == "" || len(b.CallbackData) > MaxCallbackData:
				return fmt.Errorf("button %q: callback data must be 1 to %d bytes, not %d", b.Text, MaxCallbackData, len(b.CallbackData))
			}
		}
	}
	return nil
}
