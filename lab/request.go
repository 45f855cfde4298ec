package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// OrderRequest returns a Load.NewRequest that places an order for the
// voucher as the shot's user, whose bearer token token returns:
// POST /api/vouchers/{id}/orders, with the body {"quantity": q} when the
// shot asks for a Quantity.
func OrderRequest(voucherID int64, token func(user int64) string) func(context.Context, string, Shot) (*http.Request, error) {
	path := "/api/vouchers/" + strconv.FormatInt(voucherID, 10) + "/orders"
	return func(ctx context.Context, target string, shot Shot) (*http.Request, error) {
		var body io.Reader
		if shot.Quantity > 0 {
			body = strings.NewReader(`{"quantity":` + strconv.Itoa(shot.Quantity) + `}`)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(target, "/")+path, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token(shot.User))
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, nil
	}
}

// HealthzRequest is a Load.NewRequest for GET /healthz, the cheapest
// request a server answers: the calibration of what HTTP alone costs.
func HealthzRequest(ctx context.Context, target string, _ Shot) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(target, "/")+"/healthz", nil)
}

// answerBody is the union of the bodies the API answers an order with:
// {"order_id", "status"} or {"error": {"code", "message"}}.
type answerBody struct {
	OrderID string `json:"order_id"`
	Error   struct {
		Code string `json:"code"`
	} `json:"error"`
}

// readAnswer reads a response to the end (so its connection is reused) and
// returns the order id of a 2xx answer (0 when it names none) or the error
// code of any other ("http_<status>" when the body names none). err is a
// failure to read the body, or a malformed order id: a transport error.
func readAnswer(resp *http.Response) (orderID int64, code string, err error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", fmt.Errorf("reading the answer: %w", err)
	}
	var b answerBody
	jsonErr := json.Unmarshal(body, &b)
	if resp.StatusCode/100 == 2 {
		if jsonErr == nil && b.OrderID != "" {
			if orderID, err = strconv.ParseInt(b.OrderID, 10, 64); err != nil || orderID <= 0 {
				return 0, "", fmt.Errorf("an accepted answer with order id %q", b.OrderID)
			}
		}
		return orderID, "", nil
	}
	if jsonErr != nil || b.Error.Code == "" {
		return 0, "http_" + strconv.Itoa(resp.StatusCode), nil
	}
	return 0, b.Error.Code, nil
}
