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
		Title:       *req.Title,
		Stock:       *req.Stock,
		PayValue:    req.PayValue,
		ActualValue: req.ActualValue,
		BeginTime:   begin,
		EndTime:     end,
		Shards:      1,
	}
	if req.Shards != nil {
		v.Shards = *req.Shards
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

// orderResponse is the body of a placed order.
type orderResponse struct {
	OrderID string                `json:"order_id"`
	Status  flashsale.OrderStatus `json:"status"`
}

func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) {
	userID, err := s.user(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.limit(r, userID); err != nil {
		s.fail(w, r, err)
		return
	}
	voucherID, err := pathID(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o, err := s.Orders.PlaceOrder(r.Context(), voucherID, userID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse{OrderID: formatID(o.ID), Status: o.Status})
}

// getOrder shows an order to its owner (or the admin). Anyone else gets
// not_found, so order ids cannot be probed for existence.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	tok, err := bearer(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	isAdmin := s.Auth.IsAdmin(tok)
	var userID int64
	if !isAdmin {
		if userID, err = s.Auth.User(tok); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	id, err := pathID(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o, err := s.Orders.FindOrder(r.Context(), id)
	if err == nil && !isAdmin && o.UserID != userID {
		err = flashsale.Errorf(flashsale.ENotFound, "order %d not found", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}
