// Package vouchercache keeps vouchers' rows in memory after their first
// read: the one cache of a voucher's row that the async gate, the
// synchronous strategies and the admission queue each hold. Nothing of a
// row but its stock figures (Remaining, Orders) changes after creation —
// there is no update of a voucher — and none of them reads those from
// here, so a row kept is never stale and needs no invalidation: only a
// bound, where a cache must not grow with every id it is asked for.
package vouchercache

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/flashsale/flashsale"
)

// Loader reads a voucher's row when the cache does not hold it.
type Loader func(ctx context.Context, id int64) (*flashsale.Voucher, error)

// Cache holds vouchers' rows by id. It is safe for concurrent use, and a
// hit takes no lock.
type Cache struct {
	load Loader
	max  int64
	rows sync.Map // int64 → *flashsale.Voucher
	n    atomic.Int64
}

// New returns an empty cache that reads rows with load and holds at most
// max of them (0: no bound); a full cache is emptied (then reads again
// what it is asked for).
func New(load Loader, max int) *Cache {
	return &Cache{load: load, max: int64(max)}
}

// Voucher returns the voucher's row: from memory after its first read, else
// from load, whose error it returns as it is (and keeps nothing). The row
// is shared: callers must not change it.
func (c *Cache) Voucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	if v, ok := c.rows.Load(id); ok {
		return v.(*flashsale.Voucher), nil
	}
	v, err := c.load(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.keep(v), nil
}

// Put keeps a copy of v, a row just created, so its first orders do not
// read it again.
func (c *Cache) Put(v *flashsale.Voucher) {
	cp := *v
	c.keep(&cp)
}

// keep stores v unless a row of its id is kept already, and returns the
// one kept. A full cache is emptied first.
func (c *Cache) keep(v *flashsale.Voucher) *flashsale.Voucher {
	if c.max > 0 && c.n.Load() >= c.max {
		c.rows.Clear()
		c.n.Store(0)
	}
	got, loaded := c.rows.LoadOrStore(v.ID, v)
	if !loaded {
		c.n.Add(1)
	}
	return got.(*flashsale.Voucher)
}
