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

	"github.com/flashsale/flashsale/auth"
)

// Sale is one run of the lab against running servers: a fresh voucher,
// Users buyers sending Requests order attempts, the audit, and the
// calibration on GET /healthz.
type Sale struct {
	// Strategy names the row; the servers decide how orders are taken.
	Strategy string
	// Targets are the servers' base URLs; AdminToken creates the voucher
	// and Auth (with the servers' JWT secret) mints the buyers' tokens.
	Targets    []string
	AdminToken string
	Auth       *auth.Authenticator
	// Auditor reads the database and Redis the servers use.
	Auditor *Auditor

	Stock    int
	Users    int
	Requests int
	// Doubles is the chance that a shot is a double click (see Plan);
	// Seed shuffles the plan.
	Doubles float64
	Seed    uint64
	// Concurrency and Rate are Load's.
	Concurrency int
	Rate        float64
	// Timeout bounds one request (default 30s); DrainTimeout the wait for
	// the async pipeline to persist what it accepted (default 1m).
	Timeout      time.Duration
	DrainTimeout time.Duration
	// Progress returns the display of a run (default: none).
	Progress func(label string, total int) Progress
}

// Run runs the sale and returns its row. The row is filled as far as the
// run got, also when Run returns an error: ErrTransport when requests got
// no answer (in the sale or the calibration), ErrNotDrained when the async
// pipeline did not finish in time, or the failure that stopped the run.
func (s *Sale) Run(ctx context.Context) (Row, error) {
	row := Row{Strategy: s.Strategy, Instances: len(s.Targets), Stock: s.Stock, Rejected: map[string]int{}}
	if len(s.Targets) == 0 || s.Auth == nil || s.Auditor == nil {
		return row, fmt.Errorf("%w: a sale needs targets, an authenticator and an auditor", ErrSetup)
	}
	shots, err := Plan(s.Users, s.Requests, s.Doubles, s.Seed)
	if err != nil {
		return row, err
	}
	client := NewClient(s.Concurrency, orDefault(s.Timeout, 30*time.Second))
	defer client.CloseIdleConnections()
	if row.VoucherID, err = s.createVoucher(ctx, client); err != nil {
		return row, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	tokens, err := s.tokens()
	if err != nil {
		return row, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	orders := OrderRequest(row.VoucherID, func(u int64) string { return tokens[u-1] })
	res, err := s.load(ctx, client, s.Strategy, &Load{Shots: shots, NewRequest: orders, Rate: s.Rate, Orders: true})
	if err != nil {
		return row, err
	}
	row.setLoad(res)
	drained := s.Auditor.Drain(ctx, row.VoucherID, orDefault(s.DrainTimeout, time.Minute))
	if drained != nil && !errors.Is(drained, ErrNotDrained) {
		return row, drained
	}
	ev, err := s.Auditor.Collect(ctx, row.VoucherID, res)
	if err != nil {
		return row, err
	}
	if s.Strategy == "async" && ev.RemainingRedis == nil {
		// Audited without its Redis side, orders still in the stream
		// would pass for lost.
		return row, fmt.Errorf("%w: the async voucher %d is not in Redis under the prefix the audit reads (%q); is --redis-prefix the servers'?",
			ErrSetup, row.VoucherID, s.Auditor.prefix)
	}
	row.setFindings(Check(ev))
	errs := []error{drained, transportError("the sale", res)}
	for i := range calibrations {
		// Closed loop even under --rate: a ceiling measured at the
		// scheduled rate would only echo it.
		cal, err := s.load(ctx, client, fmt.Sprintf("%s /healthz %d/%d", s.Strategy, i+1, calibrations), &Load{Shots: shots, NewRequest: HealthzRequest})
		if err != nil {
			return row, err
		}
		row.CeilingRPS = max(row.CeilingRPS, round(cal.RPS(), 1))
		errs = append(errs, transportError("the calibration", cal))
	}
	return row, errors.Join(errs...)
}

// calibrations is how many times the ceiling is measured; the best run
// counts. One short run is at the mercy of a GC pause or a neighbour on
// the machine, and a ceiling is what the servers can do, not what they did
// once.
const calibrations = 3

// load runs l against the sale's targets with its concurrency and client,
// and shows its progress.
func (s *Sale) load(ctx context.Context, client *http.Client, label string, l *Load) (*Result, error) {
	var progress Progress = nopProgress{}
	if s.Progress != nil {
		progress = s.Progress(label, countRequests(l.Shots))
	}
	l.Targets, l.Concurrency, l.Client, l.Progress = s.Targets, s.Concurrency, client, progress
	res, err := l.Run(ctx)
	progress.Finish()
	return res, err
}

// transportError reports the transport errors of a run, or nil.
func transportError(what string, res *Result) error {
	if res.Errors == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d requests of %s got no usable answer; first: %w", ErrTransport, res.Errors, res.Requests, what, res.ErrorSamples[0])
}

// createVoucher creates the sale's voucher on the first target, on sale
// from a minute ago (servers' clocks differ a little) for an hour.
func (s *Sale) createVoucher(ctx context.Context, client *http.Client) (int64, error) {
	now := time.Now().UTC()
	body, err := json.Marshal(map[string]any{
		"title":      "load lab: " + s.Strategy + " " + now.Format(time.RFC3339),
		"stock":      s.Stock,
		"begin_time": now.Add(-time.Minute),
		"end_time":   now.Add(time.Hour),
	})
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
		return 0, fmt.Errorf("creating the voucher: %w", err)
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

// tokens mints a token per buyer, valid for a day: tokens[u-1] is user
// u's.
func (s *Sale) tokens() ([]string, error) {
	tokens := make([]string, s.Users)
	for i := range tokens {
		t, err := s.Auth.UserToken(int64(i+1), 24*time.Hour)
		if err != nil {
			return nil, err
		}
		tokens[i] = t
	}
	return tokens, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
