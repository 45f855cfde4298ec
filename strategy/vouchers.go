package strategy

import (
	"context"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// Vouchers returns the voucher service the synchronous strategies share:
// vouchers live in the database only, with ids from ids.
func Vouchers(db *store.DB, ids flashsale.IDGenerator) flashsale.VoucherService {
	return &vouchers{db: db, ids: ids}
}

type vouchers struct {
	db  *store.DB
	ids flashsale.IDGenerator
}

var _ flashsale.VoucherService = (*vouchers)(nil)

func (s *vouchers) CreateVoucher(ctx context.Context, v *flashsale.Voucher) error {
	if err := v.Validate(); err != nil {
		return err
	}
	id, err := s.ids.NextID(ctx)
	if err != nil {
		return idError(err)
	}
	v.ID = id
	return s.db.CreateVoucher(ctx, v)
}

func (s *vouchers) FindVoucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	return s.db.FindVoucher(ctx, id)
}

func (s *vouchers) FindVouchers(ctx context.Context, before int64, limit int) ([]*flashsale.Voucher, error) {
	return s.db.FindVouchers(ctx, before, limit)
}
