package idempotency_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/idempotency"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/strategy"
)

// instances returns n order services on one database and Redis prefix, each
// with its own Redis client and strategy: n instances of serve.
func instances(t *testing.T, n int, cfg idempotency.Config) ([]flashsale.OrderService, *store.DB, *flashsale.Voucher) {
	t.Helper()
	url := testenv.MySQLURL(t)
	prefix := cfg.Prefix
	if prefix == "" {
		_, prefix = testenv.Redis(t)
	}
	cfg.Prefix = prefix
	var db *store.DB
	var services []flashsale.OrderService
	for range n {
		rc, _ := testenv.Redis(t)
		d, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		ids := idgen.New(rc, "id", idgen.WithPrefix(prefix))
		t.Cleanup(ids.Close)
		s, err := strategy.New("conditional", strategy.Config{DB: d, IDs: ids})
		if err != nil {
			t.Fatal(err)
		}
		services = append(services, idempotency.Wrap(s, rc, cfg))
		db = d
	}
	rc, _ := testenv.Redis(t)
	ids := idgen.New(rc, "id", idgen.WithPrefix(prefix))
	t.Cleanup(ids.Close)
	v := &flashsale.Voucher{Title: "t", Stock: 3, LimitPerBuyer: 3, PaymentWindowSeconds: 60, BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)}
	if err := strategy.NewVoucherService(db, ids, "conditional").CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return services, db, v
}

// TestSameKeyAtOnceOnSeveralInstances sends one request with one key many
// times at once, spread over three instances: one order, and every answer
// names it.
func TestSameKeyAtOnceOnSeveralInstances(t *testing.T) {
	services, db, v := instances(t, 3, idempotency.Config{})
	const requests = 30
	ids := make([]int64, requests)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range requests {
		wg.Go(func() {
			<-start
			o, err := services[i%3].PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: 7, Quantity: 2, IdempotencyKey: "k1"})
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			ids[i] = o.ID
		})
	}
	close(start)
	wg.Wait()
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("request %d got order %d, request 0 order %d; want one order", i, ids[i], ids[0])
		}
	}
	units, _, err := db.BuyerUnits(context.Background(), v.ID, 7)
	if err != nil || units != 2 {
		t.Fatalf("buyer holds %d units (%v), want the 2 of one order", units, err)
	}
}

// TestKeptAnswers: a refusal is answered again; a key reused with another
// body is invalid; another buyer's key of the same name is another key.
func TestKeptAnswers(t *testing.T) {
	services, _, v := instances(t, 1, idempotency.Config{})
	s := services[0]
	ctx := context.Background()
	place := func(user int64, q int, key string) (*flashsale.Order, error) {
		return s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: user, Quantity: q, IdempotencyKey: key})
	}
	if _, err := place(1, 3, "a"); err != nil {
		t.Fatal(err)
	}
	_, err := place(2, 1, "b")
	if flashsale.ErrorCode(err) != flashsale.ESoldOut {
		t.Fatalf("buyer 2 on a sold-out voucher: %v, want sold_out", err)
	}
	// Units come back; the kept answer to key b does not change.
	o, err := place(1, 3, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelOrder(ctx, o.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := place(2, 1, "b"); flashsale.ErrorCode(err) != flashsale.ESoldOut {
		t.Fatalf("retry of key b: %v, want the first answer, sold_out", err)
	}
	if _, err := place(2, 2, "b"); flashsale.ErrorCode(err) != flashsale.EInvalid {
		t.Fatalf("key b with another quantity: %v, want invalid", err)
	}
	if _, err := place(3, 1, "b"); err != nil {
		t.Fatalf("buyer 3's own key b: %v, want an order", err)
	}
}

// TestLeaseOfADeadHolder: a request whose instance died holding its key
// (no answer ever written) blocks retries only until its lease runs out.
func TestLeaseOfADeadHolder(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	services, _, v := instances(t, 1, idempotency.Config{Prefix: prefix, Wait: 100 * time.Millisecond})
	// What a holder writes when it claims the key, and then died.
	key := fmt.Sprintf("%s{v%d}:idem:5:k", prefix, v.ID)
	if err := rc.Do(context.Background(), rc.B().Set().Key(key).Value("p|1|dead").Px(400*time.Millisecond).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	req := flashsale.OrderRequest{VoucherID: v.ID, UserID: 5, IdempotencyKey: "k"}
	if _, err := services[0].PlaceOrder(context.Background(), req); flashsale.ErrorCode(err) != flashsale.EBusy {
		t.Fatalf("retry while the dead holder's lease runs: %v, want busy", err)
	}
	time.Sleep(400 * time.Millisecond)
	o, err := services[0].PlaceOrder(context.Background(), req)
	if err != nil || o.Status != flashsale.StatusAwaitingPayment {
		t.Fatalf("retry after the lease: %+v, %v; want an order", o, err)
	}
}
