package outbox

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter reads both forms of Retry-After (RFC 9110): seconds and
// an HTTP-date, at most an hour, and refuses the rest; Backoff waits at
// least as long.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"120", 120 * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(50 * time.Minute).Format(time.RFC850), 50 * time.Minute, true},
		{now.AddDate(1, 0, 0).Format(http.TimeFormat), time.Hour, true}, // at most an hour
		{"99999999999999", time.Hour, true},
		{"", 0, false},
		{"0", 0, false},
		{"-5", 0, false},
		{"soon", 0, false},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, false},
	} {
		got, ok := retryAfter(tc.h, now)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
	var s Webhook
	for failures := 1; failures <= 3; failures++ {
		if d := s.Backoff(failures, &RetryAfterError{Err: errDisabled, After: 10 * time.Minute}); d < 10*time.Minute {
			t.Errorf("backoff after failure %d with Retry-After 10m: %v", failures, d)
		}
	}
}
