package admission

import (
	"context"
	"strconv"
	"time"

	"github.com/flashsale/flashsale"
)

// Orders is an OrderService whose PlaceOrder asks a queue voucher's
// buyers for a pass (OrderRequest.Pass): none is EPassRequired; one that
// is not this buyer's live pass for this voucher (used, foreign, forged,
// expired) is EPassInvalid. An open voucher's orders go straight through.
type Orders struct {
	flashsale.OrderService
	q *Queue
}

var _ flashsale.OrderService = (*Orders)(nil)

// Wrap returns next with the pass check of q.
func Wrap(next flashsale.OrderService, q *Queue) *Orders {
	return &Orders{OrderService: next, q: q}
}

// PlaceOrder claims the pass, places the order and settles the pass: an
// accepted order spends it, a sold_out refusal burns it, a refusal that
// proves nothing was placed gives it back (valid until its expiry), and
// a failure that cannot tell (unavailable, internal, the caller gone)
// counts as spent: one pass never pays for two orders.
func (o *Orders) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	c, err := o.q.voucher(ctx, req.VoucherID)
	if err != nil {
		return nil, err
	}
	if !c.queued {
		return o.OrderService.PlaceOrder(ctx, req)
	}
	if req.Pass == "" {
		return nil, flashsale.Errorf(flashsale.EPassRequired, "voucher %d sells to buyers the waiting room admitted: join POST /api/vouchers/%d/queue and send its pass in Flashsale-Pass", req.VoucherID, req.VoucherID)
	}
	user := strconv.FormatInt(req.UserID, 10)
	rec, err := o.q.claim(ctx, req.VoucherID, user, req.Pass)
	if err != nil {
		return nil, err
	}
	order, err := o.OrderService.PlaceOrder(ctx, req)
	// The pass is settled even when the caller has gone.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	outcome := settlement(err)
	r := o.q.keys.room(req.VoucherID)
	// A settle that fails leaves the claim in flight: it stops counting
	// after 30 s, and the pass is neither live nor spent (reads admitted).
	_ = settleScript.Exec(sctx, o.q.client, []string{r.passes, r.expiries, r.claims, r.done, r.meta}, []string{user, rec, outcome}).Error()
	return order, err
}

// settlement returns how an order's answer settles its pass: "s" spent,
// "o" burnt by sold_out, "r" released.
func settlement(err error) string {
	switch flashsale.ErrorCode(err) {
	case "": // accepted
		return "s"
	case flashsale.ESoldOut:
		return "o"
	case flashsale.EInvalid, flashsale.EDuplicateOrder, flashsale.ELimitReached, flashsale.ENotStarted,
		flashsale.EEnded, flashsale.ERateLimited, flashsale.EBusy, flashsale.ENotFound:
		return "r" // refused before anything was placed
	}
	return "s" // the order may stand (unavailable, internal, a context error)
}

// claim takes the user's pass out of the live passes, returning its
// record, or EPassInvalid. It outlives a caller that goes away mid-claim,
// which would leave the pass claimed and never settled.
func (q *Queue) claim(ctx context.Context, voucherID int64, user, pass string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	f, ok := q.open("p", voucherID, pass, 3)
	if !ok || f[0] != user {
		return "", flashsale.Errorf(flashsale.EPassInvalid, "this pass is not yours for voucher %d", voucherID)
	}
	r := q.keys.room(voucherID)
	rec, err := claimScript.Exec(ctx, q.client, []string{r.passes, r.expiries, r.claims, r.done, r.meta}, []string{user, f[1], f[2]}).ToString()
	if rueidisNil(err) {
		return "", flashsale.Errorf(flashsale.EPassInvalid, "this pass was used or has expired")
	}
	if err != nil {
		return "", unavailable("claim a pass", err)
	}
	return rec, nil
}
