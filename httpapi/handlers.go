package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/flashsale/flashsale"
)

func formatID(id int64) string { return strconv.FormatInt(id, 10) }

// createVoucherRequest is the body of POST /api/vouchers. Pointers tell a
// missing field from a zero one.
type createVoucherRequest struct {
	Title       *string `json:"title"`
	Stock       *int    `json:"stock"`
	BeginTime   *string `json:"begin_time"` // RFC 3339
	EndTime     *string `json:"end_time"`
	PayValue    int64   `json:"pay_value"`
	ActualValue int64   `json:"actual_value"`
	Shards      *int    `json:"shards"` // default 1
	// PaymentWindowSeconds: 0 (the default) for no payment step.
	PaymentWindowSeconds int  `json:"payment_window_seconds"`
	LimitPerBuyer        *int `json:"limit_per_buyer"` // default 1
	// Admission: "open" (the default) or "queue", with AdmitPerSecond.
	Admission      string `json:"admission"`
	AdmitPerSecond int    `json:"admit_per_second"`
}

func (req *createVoucherRequest) voucher() (*flashsale.Voucher, error) {
	switch {
	case req.Title == nil:
		return nil, flashsale.Errorf(flashsale.EInvalid, `field "title" is required`)
	case req.Stock == nil:
		return nil, flashsale.Errorf(flashsale.EInvalid, `field "stock" is required`)
	case req.BeginTime == nil:
		return nil, flashsale.Errorf(flashsale.EInvalid, `field "begin_time" is required`)
	case req.EndTime == nil:
		return nil, flashsale.Errorf(flashsale.EInvalid, `field "end_time" is required`)
	case req.Shards != nil && *req.Shards < 1:
		return nil, flashsale.Errorf(flashsale.EInvalid, "shards must be 1 to %d", flashsale.MaxShards)
	case req.LimitPerBuyer != nil && *req.LimitPerBuyer < 1:
		return nil, flashsale.Errorf(flashsale.EInvalid, "limit_per_buyer must be 1 to %d", flashsale.MaxLimitPerBuyer)
	}
	begin, err := parseTime("begin_time", *req.BeginTime)
	if err != nil {
		return nil, err
	}
	end, err := parseTime("end_time", *req.EndTime)
	if err != nil {
		return nil, err
	}
	v := &flashsale.Voucher{
		Title:                *req.Title,
		Stock:                *req.Stock,
		PayValue:             req.PayValue,
		ActualValue:          req.ActualValue,
		BeginTime:            begin,
		EndTime:              end,
		Shards:               1,
		LimitPerBuyer:        1,
		PaymentWindowSeconds: req.PaymentWindowSeconds,
		Admission:            req.Admission,
		AdmitPerSecond:       req.AdmitPerSecond,
	}
	if v.Admission == "" {
		v.Admission = flashsale.AdmissionOpen
	}
	if req.Shards != nil {
		v.Shards = *req.Shards
	}
	if req.LimitPerBuyer != nil {
		v.LimitPerBuyer = *req.LimitPerBuyer
	}
	return v, v.Validate()
}

// parseTime parses the RFC 3339 time s of the named field, in UTC.
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, flashsale.Errorf(flashsale.EInvalid, "field %q must be an RFC 3339 time, like 2026-11-21T10:00:00Z", field)
	}
	return t.UTC(), nil
}

func (s *Server) createVoucher(w http.ResponseWriter, r *http.Request) {
	if err := s.admin(r); err != nil {
		s.fail(w, r, err)
		return
	}
	var req createVoucherRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := req.voucher()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.Vouchers.CreateVoucher(r.Context(), v); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": formatID(v.ID)})
}

func (s *Server) getVoucher(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.Vouchers.FindVoucher(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
