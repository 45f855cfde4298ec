package httpapi

import (
	"bytes"
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// orderView is an order as the API shows it.
type orderView struct {
	OrderID   string                `json:"order_id"`
	VoucherID string                `json:"voucher_id,omitempty"`
	UserID    string                `json:"user_id,omitempty"`
	Quantity  int                   `json:"quantity"`
	Status    flashsale.OrderStatus `json:"status"`
	// PayBy is set while the order awaits payment.
	PayBy string `json:"pay_by,omitempty"`
}

// viewOrder returns the API's view of o; brief leaves out the voucher and
// user, which the caller of a place order knows.
func viewOrder(o *flashsale.Order, brief bool) orderView {
	v := orderView{OrderID: formatID(o.ID), Quantity: o.Units(), Status: o.Status}
	if !brief {
		v.VoucherID, v.UserID = formatID(o.VoucherID), formatID(o.UserID)
	}
	if !o.PayBy.IsZero() && (o.Status == flashsale.StatusAwaitingPayment || o.Status == flashsale.StatusPending) {
		v.PayBy = o.PayBy.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// placeOrderBody is the optional body of POST /api/vouchers/{id}/orders.
type placeOrderBody struct {
	Quantity quantity `json:"quantity"`
}

// quantity is a field that must be a whole number when present; absent it
// is 0, which means 1.
type quantity int

// UnmarshalJSON implements json.Unmarshaler.
func (q *quantity) UnmarshalJSON(b []byte) error {
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 1 || n > flashsale.MaxLimitPerBuyer {
		shown := string(b)
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return flashsale.Errorf(flashsale.EInvalid, `field "quantity" must be a whole number from 1 to the voucher's limit per buyer, got %s`, shown)
	}
	*q = quantity(n)
	return nil
}

// orderRequest reads the order request of r: the voucher from the path,
// the quantity from the body (none: 1), the Idempotency-Key header.
func orderRequest(w http.ResponseWriter, r *http.Request, userID int64) (flashsale.OrderRequest, error) {
	voucherID, err := pathID(r, "id")
	if err != nil {
		return flashsale.OrderRequest{}, err
	}
	req := flashsale.OrderRequest{VoucherID: voucherID, UserID: userID}
	if r.ContentLength != 0 { // most orders have no body: read nothing then
		// A body of nothing (or only white space) is no body, however it
		// was sent: a chunked empty one has no Content-Length of 0.
		body, err := readBody(w, r)
		if err != nil {
			return flashsale.OrderRequest{}, err
		}
		if len(bytes.TrimSpace(body)) > 0 {
			var b placeOrderBody
			if err := decodeBody(body, &b); err != nil {
				return flashsale.OrderRequest{}, err
			}
			req.Quantity = int(b.Quantity)
		}
	}
	if keys := r.Header.Values("Idempotency-Key"); len(keys) > 0 {
		key := strings.TrimSpace(keys[0])
		if len(keys) > 1 || key == "" || len(key) > flashsale.MaxIdempotencyKeyBytes || !visibleASCII(key) {
			return flashsale.OrderRequest{}, flashsale.Errorf(flashsale.EInvalid, "Idempotency-Key must be one value of 1 to %d bytes of visible ASCII (0x21 to 0x7E: no spaces, controls or other bytes)", flashsale.MaxIdempotencyKeyBytes)
		}
		req.IdempotencyKey = key
	}
	if passes := r.Header.Values("Flashsale-Pass"); len(passes) > 0 {
		pass := strings.TrimSpace(passes[0])
		if len(passes) > 1 || pass == "" {
			return flashsale.OrderRequest{}, flashsale.Errorf(flashsale.EPassInvalid, "Flashsale-Pass must be one pass")
		}
		req.Pass = pass
	}
	return req, nil
}

// visibleASCII reports whether every byte of s is visible ASCII (0x21 to
// 0x7E): a key is then compared the same way by Redis, the gate and
// MySQL, whatever their collations.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7E {
			return false
		}
	}
	return true
}

func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) {
	userID, err := s.user(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.deny(r, userID); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.limit(r, userID); err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := orderRequest(w, r, userID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o, err := s.Orders.PlaceOrder(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOrder(o, true))
}

// getOrder shows an order to its owner (or the admin). Anyone else gets
// not_found, so order ids cannot be probed for existence.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	tok, err := bearer(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	isAdmin := s.guessBlocked(r) == nil && s.Auth.IsAdmin(tok)
	var userID int64
	if !isAdmin {
		if userID, err = s.Auth.UserContext(r.Context(), tok); err != nil {
			// Neither the admin's nor a user's: a guess, as on the admin
			// routes.
			s.fail(w, r, cmp.Or(s.throttleAdmin(r), err))
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
	writeJSON(w, http.StatusOK, viewOrder(o, false))
}

// cancelOrder cancels the buyer's own order; another buyer's is not_found.
func (s *Server) cancelOrder(w http.ResponseWriter, r *http.Request) {
	userID, err := s.user(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := pathID(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o, err := s.Orders.CancelOrder(r.Context(), id, userID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOrder(o, false))
}
