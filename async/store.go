package async

import (
	"context"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// What the pipeline needs from the system of record, one interface per
// part; *store.DB implements them all. The pipeline opens no transaction
// itself: each method that must read one snapshot does so on its own.

// Persister stores batches of accepted orders: the Consumer's store.
// PersistOrders must be idempotent and all-or-nothing, and must return an
// error wrapping flashsale.ErrStockShort when the batch needs more stock than
// is left.
type Persister interface {
	PersistOrders(ctx context.Context, orders []flashsale.Order) (flashsale.PersistResult, error)
}

// VoucherStore keeps vouchers: the Service's store.
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
	// VoucherSnapshot returns a voucher's row and the orders holding its
	// stock from one snapshot: what Redis is reloaded from.
	VoucherSnapshot(ctx context.Context, id int64) (*flashsale.Voucher, []flashsale.Order, error)
	// FindOrder returns a persisted order.
	FindOrder(ctx context.Context, id int64) (*flashsale.Order, error)
}

// AuditStore reads what reconciliation compares Redis with: the
// Reconciler's store.
type AuditStore interface {
	ListVouchers(ctx context.Context) ([]*flashsale.Voucher, error)
	Voucher(ctx context.Context, id int64) (*flashsale.Voucher, error)
	AuditVoucher(ctx context.Context, id int64) (flashsale.Audit, error)
	HeldOrders(ctx context.Context, voucherID int64) ([]flashsale.Order, error)
}

var (
	_ Persister    = (*store.DB)(nil)
	_ VoucherStore = (*store.DB)(nil)
	_ AuditStore   = (*store.DB)(nil)
)
