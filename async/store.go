package async

import (
	"context"

	"github.com/flashsale/flashsale"
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
	// VoucherSnapshot returns a voucher's row and the orders holding its
	// stock from one snapshot: what Redis is reloaded from.
	VoucherSnapshot(ctx context.Context, id int64) (*flashsale.Voucher, []flashsale.Order, error)
	// FindOrder returns a persisted order.
	FindOrder(ctx context.Context, id int64) (*flashsale.Order, error)
}
