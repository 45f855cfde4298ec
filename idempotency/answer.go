package idempotency

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// tokenSeq tells apart the requests of one process started in one
// nanosecond.
var tokenSeq atomic.Uint32

// answer is a kept answer: an order, or a refusal.
type answer struct {
	Order *order   `json:"order,omitempty"`
	Error *refusal `json:"error,omitempty"`
}

type order struct {
	ID        int64                 `json:"id,string"`
	VoucherID int64                 `json:"voucher,string"`
	UserID    int64                 `json:"user,string"`
	Quantity  int                   `json:"q"`
	Status    flashsale.OrderStatus `json:"status"`
	PayBy     time.Time             `json:"pay_by,omitzero"`
	CreatedAt time.Time             `json:"created,omitzero"`
}

type refusal struct {
	Code       string        `json:"code"`
	Message    string        `json:"message"`
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}

// encode returns the answer (o, err) as kept.
func encode(o *flashsale.Order, err error) string {
	var a answer
	if err != nil {
		a.Error = &refusal{Code: flashsale.ErrorCode(err), Message: flashsale.ErrorMessage(err), RetryAfter: flashsale.RetryAfter(err)}
	} else {
		a.Order = &order{ID: o.ID, VoucherID: o.VoucherID, UserID: o.UserID, Quantity: o.Units(), Status: o.Status, PayBy: o.PayBy, CreatedAt: o.CreatedAt}
	}
	b, _ := json.Marshal(a) // plain fields: cannot fail
	return string(b)
}

// decode returns a kept answer.
func decode(s string) (*flashsale.Order, error) {
	var a answer
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return nil, err
	}
	if a.Error != nil {
		return nil, &flashsale.Error{Code: a.Error.Code, Message: a.Error.Message, RetryAfter: a.Error.RetryAfter}
	}
	if a.Order == nil {
		return nil, errors.New("idempotency: a kept answer with neither an order nor an error")
	}
	o := a.Order
	return &flashsale.Order{ID: o.ID, VoucherID: o.VoucherID, UserID: o.UserID, Quantity: o.Quantity, Status: o.Status, PayBy: o.PayBy, CreatedAt: o.CreatedAt}, nil
}
