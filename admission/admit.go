package admission

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Run admits buyers every Config.AdmitEvery until ctx ends, and keeps the
// deny list fresh. Every instance runs it: admit.lua computes each step
// from Redis's clock and keys, so instances together admit what one would.
func (q *Queue) Run(ctx context.Context) error {
	if q.cfg.Units == nil {
		return errors.New("admission: Run needs Config.Units")
	}
	t := time.NewTicker(q.cfg.AdmitEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := q.AdmitAll(ctx); err != nil && ctx.Err() == nil {
			q.cfg.Logger.WarnContext(ctx, "admission: a step failed", "err", err)
		}
		if c := q.deny.cur.Load(); c == nil || time.Since(c.at) > denyStale {
			_, _ = q.loadDeny(ctx)
		}
	}
}

// AdmitAll runs one admission step for every voucher with a waiting room,
// and deletes the rooms of sales that ended over an hour ago.
func (q *Queue) AdmitAll(ctx context.Context) error {
	ids, err := q.Rooms(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		c, err := q.voucher(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if time.Since(c.end) > time.Hour {
			q.retire(ctx, id)
			continue
		}
		if _, err := q.Admit(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// retire deletes a finished sale's room: its keys share one slot, so one
// UNLINK takes them all; then the room leaves the set Run admits.
func (q *Queue) retire(ctx context.Context, voucherID int64) {
	r := q.keys.room(voucherID)
	del := q.client.B().Unlink().Key(r.waiting, r.passes, r.expiries, r.claims, r.done, r.meta, r.log, q.keys.config(voucherID)).Build()
	if err := q.client.Do(ctx, del).Error(); err != nil {
		q.cfg.Logger.WarnContext(ctx, "admission: deleting a finished sale's room", "voucher", voucherID, "err", err)
		return
	}
	q.client.Do(ctx, q.client.B().Srem().Key(q.keys.rooms()).Member(strconv.FormatInt(voucherID, 10)).Build())
	q.registered.Delete(voucherID)
}

// units returns the units a step may admit for: none once the sale has
// ended, so its waiting tickets turn sold_out (final) rather than wait.
func (q *Queue) units(ctx context.Context, voucherID int64) (int, error) {
	if c, err := q.voucher(ctx, voucherID); err == nil && !time.Now().Before(c.end) {
		return 0, nil
	}
	return q.cfg.Units(ctx, voucherID)
}

// Step is what one admission step did.
type Step struct {
	Admitted, Expired int
	SoldOut           bool
}

// Admit runs one admission step for the voucher: passes that ran out are
// taken back, and buyers admitted as the rate, the units left and the
// passes already out allow; with no unit left, every waiting ticket turns
// sold_out.
func (q *Queue) Admit(ctx context.Context, voucherID int64) (Step, error) {
	r := q.keys.room(voucherID)
	// The claims are read before the units: a claim made after the read
	// is counted by the script, one in flight before it too (its order may
	// not have taken its units yet).
	res := q.client.DoMulti(ctx,
		q.client.B().Hget().Key(r.meta).Field("claims").Build(),
		q.client.B().Zcard().Key(r.claims).Build())
	claims, err := res[0].AsInt64()
	if err != nil && !rueidisNil(err) {
		return Step{}, unavailable("admit", err)
	}
	inflight, err := res[1].AsInt64()
	if err != nil {
		return Step{}, unavailable("admit", err)
	}
	units, err := q.units(ctx, voucherID)
	if err != nil {
		return Step{}, err
	}
	out, err := admitScript.Exec(ctx, q.client, []string{r.waiting, r.passes, r.expiries, r.claims, r.done, r.meta, r.log}, []string{
		strconv.Itoa(units), strconv.FormatInt(claims, 10), strconv.FormatInt(inflight, 10),
		strconv.FormatInt(q.cfg.PassTTL.Milliseconds(), 10), strconv.Itoa(maxPerStep),
	}).AsIntSlice()
	if err != nil {
		return Step{}, unavailable("admit", err)
	}
	return Step{Admitted: int(out[0]), Expired: int(out[1]), SoldOut: out[2] == 1}, nil
}

// maxPerStep bounds the passes one step hands out, so a step is short.
const maxPerStep = 5000

// Rooms returns the ids of the vouchers with a waiting room.
func (q *Queue) Rooms(ctx context.Context) ([]int64, error) {
	members, err := q.client.Do(ctx, q.client.B().Smembers().Key(q.keys.rooms()).Build()).AsStrSlice()
	if err != nil {
		return nil, unavailable("rooms", err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// redisNow returns the milliseconds of a TIME answer.
func redisNow(r interface{ AsStrSlice() ([]string, error) }) int64 {
	t, err := r.AsStrSlice()
	if err != nil || len(t) != 2 {
		return 0
	}
	s, _ := strconv.ParseInt(t[0], 10, 64)
	us, _ := strconv.ParseInt(t[1], 10, 64)
	return s*1000 + us/1000
}
