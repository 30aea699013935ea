package retryafter

import (
	"net/http"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	at := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration // for an HTTP date, the least wait
		ok     bool
	}{
		{"none", http.Header{}, 0, false},
		{"milliseconds first", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"60"}}, 250 * time.Millisecond, true},
		{"AWS milliseconds", http.Header{"X-Amz-Retry-After": {"1500"}, "Retry-After": {"60"}}, 1500 * time.Millisecond, true},
		{"seconds", http.Header{"Retry-After": {"60"}}, time.Minute, true},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{"HTTP date", http.Header{"Retry-After": {at}}, 59 * time.Minute, true},
		{"bad milliseconds fall back to seconds", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, 2 * time.Second, true},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0, false},
		{"negative", http.Header{"Retry-After": {"-1"}}, 0, false},
		{"absurd", http.Header{"Retry-After": {"1e300"}}, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Wait(tt.header)
			if ok != tt.ok || got < tt.want || (tt.name != "HTTP date" && got != tt.want) {
				t.Errorf("Wait = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestStainlessWaitWithoutServerWait(t *testing.T) {
	for n, want := range map[string]time.Duration{"": 500 * time.Millisecond, "0": 500 * time.Millisecond, "1": time.Second, "2": 2 * time.Second, "9": 8 * time.Second} {
		req, _ := http.NewRequest(http.MethodPost, "http://x", nil)
		req.Header.Set("X-Stainless-Retry-Count", n)
		if got := StainlessWait(req, &http.Response{Header: http.Header{}}); got != want {
			t.Errorf("retry count %q: StainlessWait = %v, want %v", n, got, want)
		}
	}
}
