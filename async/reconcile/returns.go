package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// ReturnAge is how long a return may stay half done before reconciliation
// reports it: longer than a return takes, so it does not report the live
// pipeline's.
const ReturnAge = 10 * time.Second

// finishReturns reports the voucher's orders closed longer than ReturnAge
// ago whose returns are half done, and with fix finishes them: their units
// go back into the gate's stock (once: an order whose units are back is
// passed over) and they are marked done.
func (r *Reconciler) finishReturns(ctx context.Context, id int64, rep *Report, fix bool) error {
	orders, err := r.db.PendingReturnsOf(ctx, id, time.Now().Add(-ReturnAge))
	if err != nil || len(orders) == 0 {
		return err
	}
	ids := make([]int64, len(orders))
	diffs := make([]*Diff, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
		diffs[i] = rep.add(Diff{Kind: DiffReturnPending, UserID: o.UserID, OrderID: o.ID,
			Detail: fmt.Sprintf("%s at %s; its %d units are not marked back in Redis's stock", o.Status, o.UpdatedAt.Format(time.RFC3339), o.Units())})
	}
	if !fix {
		return nil
	}
	if err := r.returns.Restock(ctx, orders); err != nil {
		return err
	}
	if err := r.db.MarkReturned(ctx, ids); err != nil {
		return err
	}
	for _, d := range diffs {
		d.Fixed = true
	}
	return nil
}

// compareClosed checks a buyer Redis records and MySQL holds no live
// order of: its latest order lost on the way (reported as lost_order, and
// re-queued with fix), or closed in MySQL with its units still held in
// Redis (a return Redis lost, in durability memory: reported as
// return_pending, and finished with fix).
func (r *Reconciler) compareClosed(ctx context.Context, vk layout.VoucherKeys, rep *Report, user int64, b buyer, fix bool) error {
	o, err := r.db.FindOrder(ctx, b.latest)
	if flashsale.ErrorCode(err) == flashsale.ENotFound || err == nil && o.Status.Live() {
		return r.lostOrder(ctx, vk, rep, user, b, fix)
	}
	if err != nil {
		return err
	}
	d := rep.add(Diff{Kind: DiffReturnPending, UserID: user, OrderID: o.ID,
		Detail: fmt.Sprintf("%s in MySQL; Redis's buyer still holds its %d units", o.Status, o.Units())})
	if fix {
		if err := r.returns.Restock(ctx, []*flashsale.Order{o}); err != nil {
			return err
		}
		d.Fixed = true
	}
	return nil
}
