package strategy

import (
	"context"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// NewVoucherService returns the voucher service the synchronous strategies
// share: vouchers live in the database only, with ids from ids.
func NewVoucherService(db *store.DB, ids flashsale.IDGenerator) flashsale.VoucherService {
	return &voucherService{db: db, ids: ids}
}

// voucherService creates and finds vouchers in the database.
type voucherService struct {
	db  *store.DB
	ids flashsale.IDGenerator
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
