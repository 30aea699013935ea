package slack_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/wire/slack"
)

func TestVerify(t *testing.T) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	body := []byte(`token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&command=%2Fweather&text=94070`)
	now := time.Unix(1531420618, 0)
	signed := slack.Sign(secret, body, now)
	without := func(key string) http.Header {
		h := signed.Clone()
		h.Del(key)
		return h
	}
	with := func(key, value string) http.Header {
		h := signed.Clone()
		h.Set(key, value)
		return h
	}
	tests := []struct {
		name   string
		secret string
		h      http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"good", secret, signed, body, now, nil},
		{"good, 4 minutes later", secret, signed, body, now.Add(4 * time.Minute), nil},
		{"good, clock 4 minutes behind", secret, signed, body, now.Add(-4 * time.Minute), nil},
		{"6 minutes old", secret, signed, body, now.Add(6 * time.Minute), slack.ErrStale},
		{"6 minutes in the future", secret, signed, body, now.Add(-6 * time.Minute), slack.ErrStale},
		{"wrong secret", "another-secret", signed, body, now, slack.ErrBadSignature},
		{"tampered body", secret, signed, append(slices.Clone(body), '1'), now, slack.ErrBadSignature},
		{"other timestamp", secret, with(slack.TimestampHeader, "1531420619"), body, now, slack.ErrBadSignature},
		{"no signature", secret, without(slack.SignatureHeader), body, now, slack.ErrUnsigned},
		{"no timestamp", secret, without(slack.TimestampHeader), body, now, slack.ErrUnsigned},
		{"no headers", secret, http.Header{}, body, now, slack.ErrUnsigned},
		{"timestamp not a number", secret, with(slack.TimestampHeader, "soon"), body, now, slack.ErrUnsigned},
		{"signature of another scheme", secret, with(slack.SignatureHeader, "v1="+signed.Get(slack.SignatureHeader)[3:]), body, now, slack.ErrUnsigned},
		{"signature not hex", secret, with(slack.SignatureHeader, "v0=zz"), body, now, slack.ErrUnsigned},
		{"signature too short", secret, with(slack.SignatureHeader, signed.Get(slack.SignatureHeader)[:40]), body, now, slack.ErrUnsigned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := slack.Verify(tt.secret, tt.h, tt.body, tt.now)
			if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
	if err := slack.Verify("", signed, body, now); err == nil {
		t.Error("Verify with no signing secret succeeded")
	}
}

// Sign follows Slack's documented example: this body, secret and time give this signature.
func TestSignDocumentedExample(t *testing.T) {
	h := slack.Sign("8f742231b10e8888abcd99yyyzzz85a5",
		[]byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"),
		time.Unix(1531420618, 0))
	if got, want := h.Get(slack.SignatureHeader), "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"; got != want {
		t.Errorf("signature = %s, want %s", got, want)
	}
	if got := h.Get(slack.TimestampHeader); got != "1531420618" {
		t.Errorf("timestamp = %s", got)
	}
}
