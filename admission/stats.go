package admission

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Stats is one voucher's waiting room at a glance, for the dashboard and
// the metrics: Waiting tickets, passes Unused (live) and InFlight (claimed
// by an order being placed), the totals Admitted and Expired since the
// room opened, AdmittedLastSecond (passes handed out in the last second,
// by Redis's clock), Rate, the voucher's admit_per_second, and what a
// ticket joining now would be promised (Ticket): UnitsAhead, the units
// still to be admitted, and ETASeconds, or nil with ETAReason.
type Stats struct {
	VoucherID          int64  `json:"voucher_id,string"`
	Waiting            int64  `json:"waiting"`
	Unused             int64  `json:"unused_passes"`
	InFlight           int64  `json:"in_flight"`
	Admitted           int64  `json:"admitted"`
	Expired            int64  `json:"expired"`
	AdmittedLastSecond int64  `json:"admitted_last_second"`
	Rate               int64  `json:"admit_per_second"`
	UnitsAhead         int64  `json:"units_ahead"`
	ETASeconds         *int64 `json:"eta_seconds"`
	ETAReason          string `json:"eta_reason,omitempty"`
}

// Stats reads the voucher's waiting room from Redis (no MySQL), in one
// round trip.
func (q *Queue) Stats(ctx context.Context, voucherID int64) (Stats, error) {
	r := q.keys.room(voucherID)
	res := q.client.DoMulti(ctx,
		q.client.B().Zcard().Key(r.waiting).Build(),
		q.client.B().Hlen().Key(r.passes).Build(),
		q.client.B().Zcard().Key(r.claims).Build(),
		q.client.B().Hmget().Key(r.meta).Field("admitted", "expired", "rate", "room").Build(),
		q.client.B().Lrange().Key(r.log).Start(0).Stop(-1).Build(),
		q.client.B().Time().Build())
	for _, x := range res {
		if err := x.Error(); err != nil {
			return Stats{}, unavailable("stats", err)
		}
	}
	s := Stats{VoucherID: voucherID}
	s.Waiting, _ = res[0].AsInt64()
	s.Unused, _ = res[1].AsInt64()
	s.InFlight, _ = res[2].AsInt64()
	meta, _ := res[3].ToArray()
	vals := make([]int64, len(meta))
	for i, m := range meta {
		str, _ := m.ToString()
		vals[i], _ = strconv.ParseInt(str, 10, 64)
	}
	s.Admitted, s.Expired, s.Rate = vals[0], vals[1], vals[2]
	now := redisNow(res[5])
	log, _ := res[4].AsStrSlice()
	for _, e := range log {
		at, n, _ := strings.Cut(e, ":")
		t, _ := strconv.ParseInt(at, 10, 64)
		if t <= now-1000 {
			break
		}
		k, _ := strconv.ParseInt(n, 10, 64)
		s.AdmittedLastSecond += k
	}
	var t Ticket
	room, _ := meta[3].ToString()
	t.promise(time.Time{}, time.Time{}, s.Waiting, int(s.Rate), room, s.Unused)
	s.ETASeconds, s.ETAReason = t.ETASeconds, t.ETAReason
	if t.UnitsAhead != nil {
		s.UnitsAhead = *t.UnitsAhead
	}
	return s, nil
}

// AllStats returns the Stats of every voucher with a waiting room.
func (q *Queue) AllStats(ctx context.Context) ([]Stats, error) {
	ids, err := q.Rooms(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Stats, 0, len(ids))
	for _, id := range ids {
		s, err := q.Stats(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
