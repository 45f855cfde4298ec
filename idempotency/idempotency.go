// Package idempotency answers a retried order request with the answer of
// the first: a buyer who sends the same Idempotency-Key for the same
// voucher within Config.KeepFor gets that answer again, whatever it was (an
// order, or a refusal such as sold_out), and never a second order — also
// when the requests arrive at once on several instances. A key sent again
// with another quantity is EInvalid.
//
// The first request claims the key in Redis, atomically, with a lease; the
// others wait for its answer. An answer that says "try again" (busy,
// unavailable, rate limited) is not kept: the retry runs anew; neither is
// a refusal decided before anything was written (no such voucher, an
// invalid request, a sale not started or ended), so a flood of such
// requests leaves nothing in Redis. A buyer holds at most
// Config.MaxKeys keys of a voucher at a time; a new key beyond them is
// ERateLimited (a request without a key, or with a key held, goes on). The key
// lives under the voucher's hash tag (Config.HashTag: for async, the
// buyer's shard's), so it works on Redis Cluster. If the
// instance holding a key dies, its lease runs out and the next retry runs
// anew; the order the dead instance may have placed carries the key, and
// the strategies answer a request whose key placed an order with that
// order.
package idempotency

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/redis/rueidis"
)

var (
	//go:embed claim.lua
	claimSrc    string
	claimScript = luascript.New(claimSrc)
	//go:embed answer.lua
	answerSrc    string
	answerScript = luascript.New(answerSrc)
)

// Config configures Wrap.
type Config struct {
	// Prefix starts every key (default "flashsale:").
	Prefix string
	// KeepFor is how long an answer is kept (default 24h).
	KeepFor time.Duration
	// Lease is how long a request holds its key before it answers
	// (default 30s): longer than any request takes, so only a dead
	// instance's key runs out.
	Lease time.Duration
	// Wait bounds how long a request waits for another holding its key
	// (default 10s); then it answers busy.
	Wait time.Duration
	// HashTag returns the hash tag (without braces) a buyer's keys of a
	// voucher live under (default "v<voucher id>"): async's puts them in
	// the buyer's shard of a sharded voucher.
	HashTag func(ctx context.Context, voucherID, userID int64) string
	// MaxKeys is the most keys a buyer holds for one voucher at a time
	// (default DefaultMaxKeys): each takes a few hundred bytes of Redis
	// for KeepFor.
	MaxKeys int
}

// DefaultMaxKeys is Config.MaxKeys by default: a buyer's retries of a few
// orders need a handful.
const DefaultMaxKeys = 64

// Orders is an OrderService whose PlaceOrder keeps answers by
// idempotency key.
type Orders struct {
	flashsale.OrderService
	client rueidis.Client
	cfg    Config
}

var _ flashsale.OrderService = (*Orders)(nil)

// Wrap returns next with idempotent PlaceOrder on client.
func Wrap(next flashsale.OrderService, client rueidis.Client, cfg Config) *Orders {
	if cfg.Prefix == "" {
		cfg.Prefix = "flashsale:"
	}
	if cfg.KeepFor <= 0 {
		cfg.KeepFor = 24 * time.Hour
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 10 * time.Second
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	return &Orders{OrderService: next, client: client, cfg: cfg}
}

// PlaceOrder places the order once per idempotency key; a request without
// one goes straight through.
func (s *Orders) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	if req.IdempotencyKey == "" {
		return s.OrderService.PlaceOrder(ctx, req)
	}
	key, count := s.key(ctx, req)
	keys := []string{key, count}
	fp := strconv.Itoa(req.Units())
	token := strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatUint(uint64(tokenSeq.Add(1)), 36)
	deadline := time.Now().Add(s.cfg.Wait)
	for {
		res, err := claimScript.Exec(ctx, s.client, keys, []string{token, fp, ms(s.cfg.Lease), strconv.Itoa(s.cfg.MaxKeys), ms(s.cfg.KeepFor)}).ToArray()
		if err != nil {
			return nil, unavailable(err)
		}
		switch won, _ := res[0].AsInt64(); won {
		case 1:
			return s.run(ctx, req, keys, fp, token)
		case 2:
			wait, _ := res[1].AsInt64()
			return nil, &flashsale.Error{Code: flashsale.ERateLimited, RetryAfter: max(time.Duration(wait)*time.Millisecond, time.Second),
				Message: fmt.Sprintf("you hold %d Idempotency-Keys for this voucher already, the most there may be; retry with one of them, or without one", s.cfg.MaxKeys)}
		}
		rec, _ := res[1].ToString()
		o, err, done := replay(rec, fp)
		if done {
			return o, err
		}
		if time.Now().After(deadline) {
			return nil, &flashsale.Error{Code: flashsale.EBusy, Message: "a request with this Idempotency-Key is still in progress; try again", RetryAfter: time.Second}
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// run places the order for the request that holds the key and keeps its
// answer.
func (s *Orders) run(ctx context.Context, req flashsale.OrderRequest, keys []string, fp, token string) (*flashsale.Order, error) {
	o, err := s.OrderService.PlaceOrder(ctx, req)
	answer := ""
	if keep(err) {
		answer = encode(o, err)
	}
	// The answer is kept even when the caller has gone: the next retry
	// must find it.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if werr := answerScript.Exec(actx, s.client, keys, []string{token, fp, answer, ms(s.cfg.KeepFor)}).Error(); werr != nil && answer != "" {
		// The order stands; a retry finds it by its key in the store.
		return o, err
	}
	return o, err
}

// key returns the Redis key of a request's idempotency key, and of its
// buyer's count of keys for the voucher (claim.lua).
func (s *Orders) key(ctx context.Context, req flashsale.OrderRequest) (key, count string) {
	tag := "v" + strconv.FormatInt(req.VoucherID, 10)
	if s.cfg.HashTag != nil {
		tag = s.cfg.HashTag(ctx, req.VoucherID, req.UserID)
	}
	user := strconv.FormatInt(req.UserID, 10)
	return s.cfg.Prefix + "{" + tag + "}:idem:" + user + ":" + req.IdempotencyKey, s.cfg.Prefix + "{" + tag + "}:idemn:" + user
}

// keep reports whether an answer is kept for retries: all but those that
// say "try again", and the refusals decided before anything was written,
// which a retry gets again anyway (not found, invalid) or may rightly not
// (not started, ended: the sale's window moved).
func keep(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch flashsale.ErrorCode(err) {
	case flashsale.EBusy, flashsale.EUnavailable, flashsale.ERateLimited, flashsale.EInternal,
		// The waiting room turned the request away before any strategy
		// saw it: the retry with a pass runs anew.
		flashsale.EPassRequired, flashsale.EPassInvalid,
		flashsale.ENotFound, flashsale.EInvalid, flashsale.ENotStarted, flashsale.EEnded, flashsale.EDenied:
		return false
	}
	return true
}

// replay returns the answer in a record of another request, and whether
// it is final: false while that request still runs.
func replay(rec, fp string) (*flashsale.Order, error, bool) {
	state, rest, _ := strings.Cut(rec, "|")
	recFP, body, _ := strings.Cut(rest, "|")
	if recFP != fp {
		return nil, flashsale.Errorf(flashsale.EInvalid, "this Idempotency-Key was used with another request body (quantity %s)", recFP), true
	}
	if state != "d" {
		return nil, nil, false
	}
	o, err := decode(body)
	if err != nil && flashsale.ErrorCode(err) == flashsale.EInternal {
		return nil, fmt.Errorf("idempotency: a kept answer could not be read: %w", err), true
	}
	return o, err, true
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func unavailable(err error) error {
	return fmt.Errorf("%w: idempotency: %w", &flashsale.Error{Code: flashsale.EUnavailable, Message: "the idempotency store is unavailable; try again shortly", RetryAfter: time.Second}, err)
}
