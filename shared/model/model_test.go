package model_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentharness/harness/shared/model"
)

func TestProviderErrorContextLength(t *testing.T) {
	cause := errors.New("prompt is too long: 208656 tokens > 200000 maximum")
	tests := []struct {
		name       string
		err        *model.ProviderError
		wantIs     bool
		wantPublic string
	}{
		{
			name:       "too long",
			err:        &model.ProviderError{Provider: "anthropic", Status: 400, ContextLength: true, Err: cause},
			wantIs:     true,
			wantPublic: "the conversation is longer than the anthropic model's context window",
		},
		{
			name:       "another 400",
			err:        &model.ProviderError{Provider: "anthropic", Status: 400, Err: errors.New("temperature: range: 0..1")},
			wantPublic: "the anthropic model rejected the request (HTTP 400)",
		},
		{
			name:       "rate limited",
			err:        &model.ProviderError{Provider: "openai", Status: 429, Err: errors.New("slow down")},
			wantPublic: "the openai model is rate limited; try again shortly",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wrapped := fmt.Errorf("step 3: %w", tt.err)
			if got := errors.Is(wrapped, model.ErrContextLength); got != tt.wantIs {
				t.Errorf("errors.Is(wrapped, ErrContextLength) = %v, want %v", got, tt.wantIs)
			}
			if got := tt.err.Public(); got != tt.wantPublic {
				t.Errorf("Public() = %q, want %q", got, tt.wantPublic)
			}
			if !errors.Is(wrapped, tt.err.Err) {
				t.Errorf("errors.Is(wrapped, cause) = false, want the provider's error still reachable")
			}
		})
	}
}
