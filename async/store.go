package async

import (
	"context"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lifecycle"
)

// VoucherStore keeps vouchers: what the gate needs from the system of
// record (*store.DB, passed in by cmd). The gate opens no transaction
// itself: each method that must read one snapshot does so on its own.
type VoucherStore interface {
	// CreateVoucher stores a voucher with the id the caller assigned.
	CreateVoucher(ctx context.Context, v *flashsale.Voucher) error
	// DeleteVoucherWithoutOrders undoes a CreateVoucher.
	DeleteVoucherWithoutOrders(ctx context.Context, id int64) error
	// Voucher returns a voucher's row; FindVoucher adds its order count.
	Voucher(ctx context.Context, id int64) (*flashsale.Voucher, error)
	FindVoucher(ctx context.Context, id int64) (*flashsale.Voucher, error)
	// FindVouchers returns a page of vouchers, highest id first, below
	// before when before > 0.
	FindVouchers(ctx context.Context, before int64, limit int) ([]*flashsale.Voucher, error)
	// VoucherSnapshot returns a voucher's row, its live orders (holding
	// its stock) and its closed orders whose returns are pending, from one
	// snapshot: what Redis is reloaded from.
	VoucherSnapshot(ctx context.Context, id int64) (*flashsale.Voucher, []flashsale.Order, error)
	// ReloadSnapshot is what a reload reads, in one snapshot: the row,
	// the live orders, the closed ones whose returns are pending or whose
	// ids are in stream (the voucher's Redis stream), and the orders placed
	// with an idempotency key.
	ReloadSnapshot(ctx context.Context, id int64, stream []int64) (v *flashsale.Voucher, orders, keyed []flashsale.Order, err error)
	// FindOrder returns a persisted order.
	FindOrder(ctx context.Context, id int64) (*flashsale.Order, error)
	// PersistOrders stores accepted orders, idempotently, as the consumer
	// does: the gate persists a pending order itself before it is paid or
	// cancelled.
	PersistOrders(ctx context.Context, orders []flashsale.Order) (flashsale.PersistResult, error)
	// The order's life after it is placed.
	lifecycle.Store
}
