package strategy

import (
	"context"
	"slices"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// NewVoucherService returns the voucher service of the synchronous
// strategy named: vouchers live in the database only, with ids from ids.
// The unsafe strategies (naive, mutex, optimistic) refuse vouchers with a
// payment window or a limit per buyer above 1: they exist to show how
// selling goes wrong, not to run a sale.
func NewVoucherService(db *store.DB, ids flashsale.IDGenerator, strategy string) flashsale.VoucherService {
	return &voucherService{db: db, ids: ids, unsafe: slices.Contains(Unsafe, strategy)}
}

// Unsafe lists the strategies that oversell or undersell by design.
var Unsafe = []string{"naive", "mutex", "optimistic"}

// voucherService creates and finds vouchers in the database.
type voucherService struct {
	db     *store.DB
	ids    flashsale.IDGenerator
	unsafe bool
}

var _ flashsale.VoucherService = (*voucherService)(nil)

func (s *voucherService) CreateVoucher(ctx context.Context, v *flashsale.Voucher) error {
	if err := v.Validate(); err != nil {
		return err
	}
	// Shards spread the async gate over Redis nodes; a synchronous strategy
	// sells from one MySQL row, where shards would mean nothing.
	if v.ShardCount() > 1 {
		return flashsale.Errorf(flashsale.EInvalid, "shards > 1 needs the async strategy; this server sells from one MySQL row")
	}
	if s.unsafe && (v.PaymentWindowSeconds > 0 || v.BuyerLimit() > 1) {
		return flashsale.Errorf(flashsale.EInvalid, "payment_window_seconds and limit_per_buyer above 1 need a safe strategy; this server runs a lab-only one")
	}
	id, err := s.ids.NextID(ctx)
	if err != nil {
		return idError(err)
	}
	v.ID = id
	return s.db.CreateVoucher(ctx, v)
}

func (s *voucherService) FindVoucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	return s.db.FindVoucher(ctx, id)
}

func (s *voucherService) FindVouchers(ctx context.Context, before int64, limit int) ([]*flashsale.Voucher, error) {
	return s.db.FindVouchers(ctx, before, limit)
}
