package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// maxCached bounds the vouchers whose rows a process keeps: admission is
// asked for any id a client sends.
const maxCached = 10_000

// voucher returns the voucher's admission configuration, from its row
// (Queue.rows, read by loadVoucher).
func (q *Queue) voucher(ctx context.Context, id int64) (voucherConfig, error) {
	v, err := q.rows.Voucher(ctx, id)
	if err != nil {
		return voucherConfig{}, err
	}
	return voucherConfig{queued: v.Queued(), rate: v.AdmitPerSecond, begin: v.BeginTime, end: v.EndTime}, nil
}

// loadVoucher reads the voucher's row from MySQL, else — while MySQL does
// not answer — the copy of its admission fields the first read left in
// Redis (a row with only those), so a process (re)started during a MySQL
// outage still sells a loaded voucher, as the async gate does.
func (q *Queue) loadVoucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	v, err := q.cfg.Vouchers.Voucher(ctx, id)
	switch {
	case err == nil:
		q.keepConfig(ctx, id, voucherConfig{queued: v.Queued(), rate: v.AdmitPerSecond, begin: v.BeginTime, end: v.EndTime})
		return v, nil
	case flashsale.ErrorCode(err) == flashsale.ENotFound:
		return nil, err
	}
	c, rerr := q.readConfig(ctx, id)
	if rerr != nil {
		return nil, err // MySQL's error: Redis had no copy either
	}
	v = &flashsale.Voucher{ID: id, Admission: flashsale.AdmissionOpen, AdmitPerSecond: c.rate, BeginTime: c.begin, EndTime: c.end}
	if c.queued {
		v.Admission = flashsale.AdmissionQueue
	}
	return v, nil
}

// keepConfig writes c to Redis, once per voucher (NX), until two hours
// after the sale's end; a failure only costs the fallback.
func (q *Queue) keepConfig(ctx context.Context, id int64, c voucherConfig) {
	val := fmt.Sprintf("%t|%d|%d|%d", c.queued, c.rate, c.begin.UnixMilli(), c.end.UnixMilli())
	cmd := q.client.B().Set().Key(q.keys.config(id)).Value(val).Nx().
		PxatMillisecondsTimestamp(c.end.Add(2 * time.Hour).UnixMilli()).Build()
	_ = q.client.Do(ctx, cmd).Error()
}

// readConfig reads the copy keepConfig wrote.
func (q *Queue) readConfig(ctx context.Context, id int64) (voucherConfig, error) {
	val, err := q.client.Do(ctx, q.client.B().Get().Key(q.keys.config(id)).Build()).ToString()
	if err != nil {
		return voucherConfig{}, err
	}
	f := strings.Split(val, "|")
	if len(f) != 4 {
		return voucherConfig{}, fmt.Errorf("admission: configuration %q", val)
	}
	rate, err1 := strconv.Atoi(f[1])
	begin, err2 := strconv.ParseInt(f[2], 10, 64)
	end, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return voucherConfig{}, fmt.Errorf("admission: configuration %q", val)
	}
	return voucherConfig{queued: f[0] == "true", rate: rate, begin: time.UnixMilli(begin), end: time.UnixMilli(end)}, nil
}
