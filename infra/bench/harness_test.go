package main

import (
	"strings"
	"testing"
)

func TestCheckTurn(t *testing.T) {
	const (
		output = `data: {"type":"tool-output-available","toolCallId":"call_1","output":"12:00"}` + "\n\n"
		finish = `data: {"type":"finish","finishReason":"stop"}` + "\n\n"
		done   = "data: [DONE]\n\n"
	)
	tests := []struct {
		name    string
		body    string
		wantErr string // empty: the turn passes
	}{
		{"whole turn", output + finish + done, ""},
		{"no tool output", finish + done, "no tool-output-available"},
		{"no finish", output + done, "no finish"},
		{"no terminator", output + finish, "[DONE]"},
		{"error chunk", output + `data: {"type":"error","errorText":"boom"}` + "\n\n" + finish + done, "boom"},
		{"finished with an error", output + `data: {"type":"finish","finishReason":"error"}` + "\n\n" + done, "finished with an error"},
		{"finish-step is not finish", output + `data: {"type":"finish-step"}` + "\n\n" + done, "no finish"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkTurn(strings.NewReader(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkTurn() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkTurn() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
