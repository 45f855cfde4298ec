package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// The payment provider's webhook, POST /api/payments, signed as Stripe
// signs its webhooks: the header
//
//	Flashsale-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//
// (several v1 entries are allowed, one per secret the provider holds).
// A signature that does not match, or a timestamp more than
// SignatureTolerance from the server's clock, is refused with 401.

// SignatureHeader is the header of the webhook's signature.
const SignatureHeader = "Flashsale-Signature"

// SignatureTolerance is how far the signature's timestamp may be from the
// server's clock: a captured request cannot be replayed later than this.
const SignatureTolerance = 5 * time.Minute

// paymentBody is the body of POST /api/payments.
type paymentBody struct {
	PaymentID *string         `json:"payment_id"`
	OrderID   json.RawMessage `json:"order_id"` // a string or a number
	Amount    *int64          `json:"amount"`   // cents
}

func (s *Server) payment(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.verifySignature(r.Header.Get(SignatureHeader), body, s.now()); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := parsePayment(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o, err := s.Orders.PayOrder(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"order_id": formatID(o.ID), "status": o.Status})
}

// verifySignature checks the webhook's signature header over body at now.
func (s *Server) verifySignature(header string, body []byte, now time.Time) error {
	if len(s.PaymentSecret) == 0 {
		return &flashsale.Error{Code: flashsale.EUnavailable, Message: "payments are not set up on this server (serve --payment-secret-file)"}
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return flashsale.Errorf(flashsale.EUnauthorized, "the %s header must be t=<unix seconds>,v1=<hex HMAC-SHA256>", SignatureHeader)
	}
	if d := now.Sub(time.Unix(t, 0)); d > SignatureTolerance || d < -SignatureTolerance {
		return flashsale.Errorf(flashsale.EUnauthorized, "the signature's timestamp is more than %s from the server's clock", SignatureTolerance)
	}
	mac := hmac.New(sha256.New, s.PaymentSecret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return flashsale.Errorf(flashsale.EUnauthorized, "the signature does not match the body")
}

// Sign returns the signature header of body at t with secret, as the
// payment provider computes it.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// parsePayment reads a payment from a signed body.
func parsePayment(body []byte) (flashsale.Payment, error) {
	var b paymentBody
	if err := decodeBody(body, &b); err != nil {
		return flashsale.Payment{}, err
	}
	switch {
	case b.PaymentID == nil || *b.PaymentID == "" || len(*b.PaymentID) > flashsale.MaxPaymentIDBytes:
		return flashsale.Payment{}, flashsale.Errorf(flashsale.EInvalid, `field "payment_id" must be a string of 1 to %d bytes`, flashsale.MaxPaymentIDBytes)
	case b.Amount == nil || *b.Amount < 0:
		return flashsale.Payment{}, flashsale.Errorf(flashsale.EInvalid, `field "amount" must be a whole number of cents, 0 or more`)
	}
	id, err := orderID(b.OrderID)
	if err != nil {
		return flashsale.Payment{}, flashsale.Errorf(flashsale.EInvalid, `field "order_id" must be an order id, as a string or a number: %v`, err)
	}
	return flashsale.Payment{ID: *b.PaymentID, OrderID: id, Amount: *b.Amount}, nil
}

// orderID parses the order id of a payment: a JSON string or number
// holding an id in its one canonical form (flashsale.ParseID).
func orderID(raw json.RawMessage) (int64, error) {
	s := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
	}
	if len(raw) == 0 {
		return 0, errors.New("it is missing")
	}
	return flashsale.ParseID(s)
}
