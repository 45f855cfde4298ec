package consume

import (
	"context"
	"time"
)

// unknownPause is how long a worker leaves alone a voucher its database
// does not have before it tries again.
const unknownPause = time.Minute

// A voucher the consumer's database does not have is a configuration
// error, not a poison order: the consumer reads a Redis prefix that
// belongs to another database (two deployments on one Redis and one
// prefix; cmd refuses to start such a process, this is the defence behind
// that), or the voucher's row was deleted by hand. Dead-lettering the
// orders would lose another deployment's sale, so the worker leaves them
// pending, hands them back to the group (release) for a consumer of the
// right database to take over, says so loudly, and leaves the voucher
// alone for unknownPause; then it tries again.

// unknownVoucher reports a batch the database refused for want of its
// voucher, hands back what the worker holds and returns how long to leave
// the voucher alone.
func (w *worker) unknownVoucher(ctx context.Context, cause error) time.Duration {
	w.c.unknownVoucher.Add(1)
	released, err := w.release(ctx)
	attrs := []any{"err", cause, "handed_back", released, "retry_in", unknownPause}
	if err != nil {
		attrs = append(attrs, "handing_back_failed", err)
	}
	w.log.Error("async: CONFIGURATION ERROR: this consumer's database has no such voucher; its orders stay pending in Redis "+
		"for a consumer of the right database (none is dead-lettered). Is --db the database this --redis-prefix belongs to?", attrs...)
	return unknownPause
}

// release hands the entries pending on this consumer back to the group:
// it moves them, uncounted (XCLAIM JUSTID) and idle, to a consumer name
// that never has a heartbeat, so any consumer takes them over at its next
// look for dead consumers. It returns how many it moved.
func (w *worker) release(ctx context.Context) (int, error) {
	parked := "released-by-" + w.c.cfg.Name
	idle := max(w.c.cfg.ClaimIdle, w.c.cfg.Heartbeat).Milliseconds()
	moved := 0
	for {
		cmd := w.c.client.B().Xpending().Key(w.keys.Orders).Group(w.c.cfg.Group).Start("-").End("+").
			Count(int64(w.c.cfg.BatchSize)).Consumer(w.c.cfg.Name).Build()
		pending, err := w.c.client.Do(ctx, cmd).ToArray()
		if err != nil || len(pending) == 0 {
			return moved, err
		}
		ids := make([]string, len(pending))
		for i, p := range pending {
			f, err := p.ToArray()
			if err != nil || len(f) == 0 {
				return moved, err
			}
			if ids[i], err = f[0].ToString(); err != nil {
				return moved, err
			}
		}
		claim := w.c.client.B().Xclaim().Key(w.keys.Orders).Group(w.c.cfg.Group).Consumer(parked).
			MinIdleTime("0").Id(ids...).Idle(idle).Justid().Build()
		if err := w.c.client.Do(ctx, claim).Error(); err != nil {
			return moved, err
		}
		moved += len(ids)
		if len(ids) < w.c.cfg.BatchSize {
			return moved, nil
		}
	}
}
