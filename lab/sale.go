package lab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
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
	// QuantityMax: each order asks for 1..QuantityMax units, drawn by Seed
	// (0 or 1: one, and the request has no body). LimitPerBuyer is the
	// voucher's limit_per_buyer (0: the servers' default, 1).
	QuantityMax   int
	LimitPerBuyer int
	// PaymentWindow, when positive (whole seconds), is the voucher's
	// payment window: each accepted order is paid with probability
	// PayRatio, cancelled with probability CancelRatio, or else left to
	// expire (see Lifecycle), and the buyers without an order keep trying,
	// so that returned units are resold, until every unit is paid or the
	// sale ends, SaleDuration (default 1m) after it began. PaymentSecret
	// signs the payments: the servers' --payment-secret-file.
	PaymentWindow         time.Duration
	PayRatio, CancelRatio float64
	SaleDuration          time.Duration
	PaymentSecret         []byte
	// Concurrency and Rate are Load's.
	Concurrency int
	Rate        float64
	// Timeout bounds one request (default 30s); DrainTimeout the wait for
	// the async pipeline to persist what it accepted (default 1m), and
	// with a payment window, the payment window more for every order to
	// be settled.
	Timeout      time.Duration
	DrainTimeout time.Duration
	// Unreachable is how long a target may answer nothing while its
	// requests fail before the sale stops with ErrUnreachable (default
	// 3s; see Load.Unreachable).
	Unreachable time.Duration
	// Progress returns the display of a run (default: none).
	Progress func(label string, total int) Progress
	// Crowd, when set, makes the buyers people and bots at a start in
	// the near future instead of the Plan of Requests (crowd.go).
	Crowd *Crowd
}

// Run runs the sale and returns its row. The row is filled as far as the
// run got, also when Run returns an error: ErrTransport when requests got
// no answer (in the sale or the calibration), ErrNotDrained when the async
// pipeline did not finish in time or, with a payment window, orders were
// not settled in time, or the failure that stopped the run.
func (s *Sale) Run(ctx context.Context) (Row, error) {
	row := Row{Strategy: s.Strategy, Instances: len(s.Targets), Stock: s.Stock, LimitPerBuyer: max(s.LimitPerBuyer, 1), Rejected: map[string]int{}}
	if err := s.validate(); err != nil {
		return row, err
	}
	var shots []Shot
	if s.Crowd == nil {
		var err error
		if shots, err = Plan(s.Users, s.Requests, s.Doubles, s.Seed); err != nil {
			return row, err
		}
		Quantities(shots, s.QuantityMax, s.Seed)
	}
	client := NewClient(s.Concurrency, orDefault(s.Timeout, 30*time.Second))
	defer client.CloseIdleConnections()
	now := time.Now()
	deadline := now.Add(orDefault(s.SaleDuration, time.Minute))
	begin, end := s.saleWindow(now, deadline)
	var err error
	if row.VoucherID, err = s.createVoucher(ctx, client, begin, end); err != nil {
		return row, setupError(err)
	}
	tokens, err := s.tokens()
	if err != nil {
		return row, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	token := func(u int64) string { return tokens[u-1] }
	if s.Crowd != nil {
		return s.runCrowd(ctx, row, token, now, begin, end)
	}
	res, b, err := s.sell(ctx, client, row.VoucherID, shots, token, deadline)
	if err != nil {
		return row, err
	}
	row.setLoad(res)
	return row, s.finish(ctx, client, &row, res, b, shots)
}

// finish audits a sale whose answers are res into row and measures its
// ceiling with shots' requests; see Run for the errors.
func (s *Sale) finish(ctx context.Context, client *http.Client, row *Row, res *Result, b *buyers, shots []Shot) error {
	if err := s.checkConsumers(ctx, row.VoucherID); err != nil {
		return err // before the drain waits for what a foreign consumer holds
	}
	if res.Errors > 0 {
		// Before the drain waits for what a dead server cannot persist,
		// and before the calibration: are the targets still there?
		if err := s.probe(ctx, client); err != nil {
			return err
		}
	}
	drained, buyersErr, err := s.audit(ctx, row, res, b)
	if err != nil {
		return err
	}
	calErr, err := s.calibrate(ctx, client, shots, row)
	if err != nil {
		return err
	}
	return errors.Join(drained, transportError("the sale", res), buyersErr, calErr)
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

// validate checks what a sale needs before it starts.
func (s *Sale) validate() error {
	switch {
	case len(s.Targets) == 0 || s.Auth == nil || s.Auditor == nil:
		return fmt.Errorf("%w: a sale needs targets, an authenticator and an auditor", ErrSetup)
	case s.PaymentWindow < 0 || s.PaymentWindow%time.Second != 0:
		return fmt.Errorf("%w: the payment window must be whole seconds, got %s", ErrSetup, s.PaymentWindow)
	case s.PaymentWindow > 0 && len(s.PaymentSecret) == 0:
		return fmt.Errorf("%w: a sale with a payment window needs the servers' payment secret", ErrSetup)
	case !(s.PayRatio >= 0 && s.CancelRatio >= 0 && s.PayRatio+s.CancelRatio <= 1): // NaN too
		return fmt.Errorf("%w: the pay and cancel ratios must be within [0, 1], their sum at most 1", ErrSetup)
	case s.Crowd != nil && s.PaymentWindow > 0:
		return fmt.Errorf("%w: a sale of bots and people has no payment window", ErrSetup)
	case s.Crowd != nil:
		return s.Crowd.validate()
	}
	return nil
}

// sell sends the sale's orders: the plan's shots and, with a payment
// window, the buyers' payments and cancels and the waves of buyers who
// keep trying, until the buyers have acted (b is nil without a window).
func (s *Sale) sell(ctx context.Context, client *http.Client, voucherID int64, shots []Shot, token func(int64) string, deadline time.Time) (*Result, *buyers, error) {
	l := &Load{Shots: shots, NewRequest: OrderRequest(voucherID, token), Rate: s.Rate, Orders: true}
	if s.PaymentWindow <= 0 {
		res, err := s.load(ctx, client, s.Strategy, l)
		return res, nil, err
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &buyers{ctx: bctx, client: client, targets: s.Targets, token: token, secret: s.PaymentSecret,
		price: labPrice, window: s.PaymentWindow, pay: s.PayRatio, cancel: s.CancelRatio,
		rng: rand.New(rand.NewPCG(s.Seed, uint64(voucherID))), acted: map[int64]bool{}, holders: map[int64]bool{},
		out: Lifecycle{Refused: map[string]int{}}}
	b.fate = b.rng.Float64()
	l.Accepted, l.More = b.accepted, s.resale(b, deadline)
	res, err := s.load(ctx, client, s.Strategy, l)
	if err != nil {
		cancel() // the buyers who are still thinking need not act
	}
	b.wait()
	return res, b, err
}

// audit waits for the orders to be persisted (and settled, with a
// payment window) and audits them into row. drained is ErrNotDrained when
// they were not in time, buyersErr the buyers' transport errors, and err
// a failure that stopped the audit.
func (s *Sale) audit(ctx context.Context, row *Row, res *Result, b *buyers) (drained, buyersErr, err error) {
	timeout := orDefault(s.DrainTimeout, time.Minute)
	wait := s.Auditor.Drain
	var paid []int64
	var out Lifecycle
	if b != nil {
		timeout += s.PaymentWindow
		wait = s.Auditor.Settle
		var samples []error
		out, paid, samples = b.result()
		if out.Errors > 0 {
			buyersErr = fmt.Errorf("%w: %d payments and cancels got no usable answer; first: %w", ErrTransport, out.Errors, samples[0])
		}
	}
	drained = wait(ctx, row.VoucherID, timeout)
	if drained != nil && !errors.Is(drained, ErrNotDrained) {
		return nil, nil, drained
	}
	if err := s.checkConsumers(ctx, row.VoucherID); err != nil {
		return nil, nil, err // joined meanwhile
	}
	ev, err := s.Auditor.collect(ctx, row.VoucherID, res, paid)
	if err != nil {
		return nil, nil, err
	}
	if s.Strategy == "async" && ev.RemainingRedis == nil {
		// Audited without its Redis side, orders still in the stream
		// would pass for lost.
		return nil, nil, fmt.Errorf("%w: the async voucher %d is not in Redis under the prefix the audit reads (%q); is --redis-prefix the servers'?",
			ErrSetup, row.VoucherID, s.Auditor.prefix)
	}
	if b != nil {
		// Units come back after buyers were refused: a refusal then was
		// right, and what is left is the lifecycle's unpaid.
		ev.TurnedAway, ev.Buyers = nil, &out
	}
	row.setFindings(Check(ev))
	if row.Crowd != nil {
		row.Crowd.count(ev.UserUnits, s.Users)
	}
	return drained, buyersErr, nil
}

// labPrice is the price, in cents, of the lab's vouchers: a payment is
// labPrice × the order's quantity.
const labPrice = 990

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
			req, err := HealthzRequest(ctx, target, Shot{})
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

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
