package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
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
	// Consumers names the async consumers the caller started for the
	// targets (their --consumer-name). When set, a consumer of another
	// name in the voucher's consumer group stops the run with
	// ErrForeignConsumer; nil: not checked (running servers' consumers
	// are not known).
	Consumers []string

	Stock int
	// Shards splits the async voucher's stock over Redis slots (0 or 1:
	// one); the synchronous strategies refuse more than 1.
	Shards   int
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
	// Unreachable is how long a target may answer nothing while its
	// requests fail before the sale stops with ErrUnreachable (default
	// 3s; see Load.Unreachable).
	Unreachable time.Duration
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
		return row, setupError(err)
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
	if err := s.checkConsumers(ctx, row.VoucherID); err != nil {
		return row, err // before the drain waits for what a foreign consumer holds
	}
	if res.Errors > 0 {
		// Before the drain waits for what a dead server cannot persist,
		// and before the calibration: are the targets still there?
		if err := s.probe(ctx, client); err != nil {
			return row, err
		}
	}
	drained := s.Auditor.Drain(ctx, row.VoucherID, orDefault(s.DrainTimeout, time.Minute))
	if drained != nil && !errors.Is(drained, ErrNotDrained) {
		return row, drained
	}
	if err := s.checkConsumers(ctx, row.VoucherID); err != nil {
		return row, err // joined meanwhile
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
	calErr, err := s.calibrate(ctx, client, shots, &row)
	if err != nil {
		return row, err
	}
	return row, errors.Join(drained, transportError("the sale", res), calErr)
}

// checkConsumers returns an error wrapping ErrForeignConsumer when a
// consumer not in s.Consumers read the voucher's orders.
func (s *Sale) checkConsumers(ctx context.Context, voucherID int64) error {
	if s.Consumers == nil {
		return nil
	}
	names, err := s.Auditor.Consumers(ctx, voucherID)
	if err != nil {
		return err
	}
	foreign := slices.DeleteFunc(names, func(n string) bool { return slices.Contains(s.Consumers, n) })
	if len(foreign) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s read voucher %d's orders (the lab's are %s): another deployment runs on the Redis prefix %q; give the lab a --redis-prefix of its own",
		ErrForeignConsumer, strings.Join(foreign, ", "), voucherID, strings.Join(s.Consumers, ", "), s.Auditor.prefix)
}

// calibrate measures the ceiling into row. calErr counts the calibration's
// transport errors; err is a failure that stopped it.
func (s *Sale) calibrate(ctx context.Context, client *http.Client, shots []Shot, row *Row) (calErr, err error) {
	var errs []error
	for i := range calibrations {
		// Closed loop even under --rate: a ceiling measured at the
		// scheduled rate would only echo it.
		cal, err := s.load(ctx, client, fmt.Sprintf("%s ceiling %d/%d (GET /healthz)", s.Strategy, i+1, calibrations), &Load{Shots: shots, NewRequest: HealthzRequest})
		if err != nil {
			return nil, err
		}
		row.CeilingRPS = max(row.CeilingRPS, round(cal.RPS(), 1))
		errs = append(errs, transportError("the calibration", cal))
	}
	return errors.Join(errs...), nil
}

// calibrations is how many times the ceiling is measured; the best run
// counts. One short run is at the mercy of a GC pause or a neighbour on
// the machine, and a ceiling is what the servers can do, not what they did
// once.
const calibrations = 3

// CeilingNote says in one line what the ceiling is.
func CeilingNote() string {
	return fmt.Sprintf("ceiling: after each sale, the same requests on GET /healthz (no Redis, no database), closed loop, %d times, the best counting: what HTTP alone reaches on these servers", calibrations)
}

// probe asks every target's GET /healthz until it answers, and returns
// ErrUnreachable for one that gave no answer within Unreachable.
func (s *Sale) probe(ctx context.Context, client *http.Client) error {
	wait := orDefault(s.Unreachable, defaultUnreachable)
	for _, target := range s.Targets {
		deadline := time.Now().Add(wait)
		for {
			req, err := HealthzRequest(ctx, target, 0)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%w: %s gave no answer for %s after the sale's transport errors: %w", ErrUnreachable, target, wait, err)
			}
			if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
				return err
			}
		}
	}
	return nil
}

// defaultUnreachable is Sale.Unreachable's default.
const defaultUnreachable = 3 * time.Second

// load runs l against the sale's targets with its concurrency and client,
// and shows its progress.
func (s *Sale) load(ctx context.Context, client *http.Client, label string, l *Load) (*Result, error) {
	var progress Progress = nopProgress{}
	if s.Progress != nil {
		progress = s.Progress(label, countRequests(l.Shots))
	}
	l.Targets, l.Concurrency, l.Client, l.Progress = s.Targets, s.Concurrency, client, progress
	l.Unreachable = orDefault(s.Unreachable, defaultUnreachable)
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
		"shards":     max(s.Shards, 1),
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

// setupError marks err as a failure to set the sale up, unless it says
// already that a target is unreachable.
func setupError(err error) error {
	if errors.Is(err, ErrUnreachable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrSetup, err)
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
