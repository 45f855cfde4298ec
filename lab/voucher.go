package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// createVoucher creates the sale's voucher on the first target, on sale
// from begin to end, with the sale's purchase rules and, with a Crowd,
// its admission.
func (s *Sale) createVoucher(ctx context.Context, client *http.Client, begin, end time.Time) (int64, error) {
	body, err := json.Marshal(s.voucherBody(begin, end))
	if err != nil {
		return 0, err
	}
	url := strings.TrimSuffix(s.Targets[0], "/") + "/api/vouchers"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: creating the voucher: %s gave no answer: %w", ErrUnreachable, s.Targets[0], err)
	}
	defer resp.Body.Close()
	var created struct {
		ID    string `json:"id"`
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("creating the voucher: POST %s answered %s (%s: %s)", url, resp.Status, created.Error.Code, created.Error.Message)
	}
	return strconv.ParseInt(created.ID, 10, 64)
}

// voucherBody is the body of POST /api/vouchers for the sale's voucher.
// "admission" is sent only when the Crowd names one: a server that
// predates admission refuses the field.
func (s *Sale) voucherBody(begin, end time.Time) map[string]any {
	v := map[string]any{
		"title":      "load lab: " + s.Strategy + " " + time.Now().UTC().Format(time.RFC3339),
		"stock":      s.Stock,
		"shards":     max(s.Shards, 1),
		"pay_value":  labPrice,
		"begin_time": begin.UTC(),
		"end_time":   end.UTC(),
	}
	if s.PaymentWindow > 0 {
		v["payment_window_seconds"] = int(s.PaymentWindow / time.Second)
	}
	if s.LimitPerBuyer > 1 {
		v["limit_per_buyer"] = s.LimitPerBuyer
	}
	if c := s.Crowd; c != nil && c.Admission != "" {
		v["admission"] = c.Admission
		if c.Admission == AdmissionQueue {
			v["admit_per_second"] = c.AdmitPerSecond
		}
	}
	return v
}

// saleWindow returns the voucher's begin and end: on sale from a minute
// ago (servers' clocks differ a little) for an hour, or with a payment
// window until deadline; with a Crowd, from Lead after now (the crowd's
// time before the start) for SaleDuration (default 1m).
func (s *Sale) saleWindow(now, deadline time.Time) (begin, end time.Time) {
	switch {
	case s.Crowd != nil:
		begin = now.Add(s.Crowd.Lead)
		return begin, begin.Add(orDefault(s.SaleDuration, time.Minute))
	case s.PaymentWindow > 0:
		return now.Add(-time.Minute), deadline
	}
	return now.Add(-time.Minute), now.Add(time.Hour)
}

// setupError marks err as a failure to set the sale up, unless it says
// already that a target is unreachable.
func setupError(err error) error {
	if errors.Is(err, ErrUnreachable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrSetup, err)
}

// tokens mints a token per account, the Crowd's bots included, valid for
// a day: tokens[u-1] is user u's.
func (s *Sale) tokens() ([]string, error) {
	n := s.Users
	if s.Crowd != nil {
		n += s.Crowd.Bots
	}
	tokens := make([]string, n)
	for i := range tokens {
		t, err := s.Auth.UserToken(int64(i+1), 24*time.Hour)
		if err != nil {
			return nil, err
		}
		tokens[i] = t
	}
	return tokens, nil
}
