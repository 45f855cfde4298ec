package lab_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// faultyShop is a fake order service on a real database that is wrong in
// two ways the lab must see: it answers "accepted" for some buyers without
// storing an order, and drops the connection of others.
type faultyShop struct {
	db   *store.DB
	auth *auth.Authenticator
}

const shopVoucher = 7

func (s *faultyShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz":
		fmt.Fprint(w, `{"status":"ok"}`)
	case r.URL.Path == "/api/vouchers":
		var v flashsale.Voucher
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		v.ID = shopVoucher
		if err := s.db.CreateVoucher(r.Context(), &v); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"%d"}`, v.ID)
	default:
		s.order(w, r)
	}
}

// order stores the orders of users 3, 6, 9…, pretends to take those of
// users 1, 4, 7… and drops the connection of users 2, 5, 8….
func (s *faultyShop) order(w http.ResponseWriter, r *http.Request) {
	user, err := s.auth.User(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	o := &flashsale.Order{ID: 1000 + user, VoucherID: shopVoucher, UserID: user, Status: flashsale.StatusCreated}
	switch user % 3 {
	case 0:
		err := s.db.Tx(r.Context(), func(tx *store.Tx) error {
			if _, err := tx.DecrementRemaining(r.Context(), shopVoucher, 1); err != nil {
				return err
			}
			return tx.InsertOrder(r.Context(), o, 1)
		})
		if err != nil {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, `{"error":{"code":%q}}`, flashsale.ErrorCode(err))
			return
		}
	case 1:
		// Accepted, never stored.
	default:
		panic(http.ErrAbortHandler)
	}
	fmt.Fprintf(w, `{"order_id":"%d","status":"created"}`, o.ID)
}

// TestSaleAuditsTheDatabase runs a Sale against the faulty shop: the
// audit must count the accepted orders missing from the database as lost,
// the dropped connections as transport errors, and fail the run for them.
// faultySale returns a Sale of 60 attempts by 30 buyers, stock 100,
// against a faulty shop on a fresh database, audited under a test prefix.
func faultySale(t *testing.T, strategy string) *lab.Sale {
	t.Helper()
	db, rc, prefix, authn := testBackends(t)
	srv := httptest.NewServer(&faultyShop{db: db, auth: authn})
	t.Cleanup(srv.Close)
	return &lab.Sale{
		Strategy: strategy, Targets: []string{srv.URL}, AdminToken: strings.Repeat("a", 32), Auth: authn, Auditor: lab.NewAuditor(db, rc, prefix),
		Stock: 100, Users: 30, Requests: 60, Concurrency: 4,
	}
}

func TestSaleAuditsTheDatabase(t *testing.T) {
	row, err := faultySale(t, "faulty").Run(context.Background())
	if !errors.Is(err, lab.ErrTransport) {
		t.Errorf("Run error = %v, want ErrTransport", err)
	}
	// 10 buyers of each kind, 2 attempts each: the second attempt of a
	// storing buyer is a duplicate. The 10 whose connections were dropped
	// got nothing while stock was left: undersold.
	if row.VoucherID != shopVoucher || row.Requests != 60 || row.Accepted != 30 || row.Errors != 20 ||
		row.Rejected["duplicate_order"] != 10 || row.Orders != 10 || row.DistinctBuyers != 10 || row.Lost != 20 ||
		row.RemainingDB != 90 || row.StockDrift != 0 || row.Oversold != 0 || row.Undersold != 10 ||
		row.RemainingRedis != nil || row.CeilingRPS <= 0 || row.ElapsedMs <= 0 || row.SoldOutMs != nil { // stock was left: no sold_out
		t.Errorf("row %+v", row)
	}
}

// TestCeilingIsClosedLoopUnderARate: the sale runs at the scheduled rate,
// the /healthz ceiling as fast as the servers go; measured at the rate it
// would only echo it.
func TestCeilingIsClosedLoopUnderARate(t *testing.T) {
	sale := faultySale(t, "faulty")
	sale.Rate = 30
	row, err := sale.Run(context.Background())
	if !errors.Is(err, lab.ErrTransport) { // the shop drops connections
		t.Fatalf("Run error = %v, want ErrTransport", err)
	}
	if row.RPS > 2*sale.Rate || row.CeilingRPS < 5*sale.Rate {
		t.Fatalf("sale %.1f rps, ceiling %.1f rps; want the sale near %g/s and the ceiling far above", row.RPS, row.CeilingRPS, sale.Rate)
	}
}

// TestAsyncVoucherMissingFromRedisIsASetupError: an async sale whose
// voucher the audit cannot find in Redis (another --redis-prefix) is not
// audited from MySQL alone, where its unpersisted orders would look lost.
func TestAsyncVoucherMissingFromRedisIsASetupError(t *testing.T) {
	_, err := faultySale(t, "async").Run(context.Background())
	if !errors.Is(err, lab.ErrSetup) || !strings.Contains(err.Error(), "--redis-prefix") {
		t.Fatalf("Run error = %v, want ErrSetup naming --redis-prefix", err)
	}
}
