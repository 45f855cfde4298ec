package lab_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/lock"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/strategy"
)

// shop is a real deployment for the lab's tests: instances of one
// strategy on a fresh MySQL database and a Redis prefix of the test's,
// each an HTTP server of the API with its own order service and expirer
// (and, for async, its own stream consumer), as flashsale serve runs them.
type shop struct {
	urls    []string
	auth    *auth.Authenticator
	auditor *lab.Auditor
	secret  []byte // the payment webhook's
	db      *store.DB
}

// testBackends opens a fresh MySQL database and a Redis prefix for the
// test, and the authenticator of its tokens (admin token strings.Repeat("a", 32)).
func testBackends(t *testing.T) (*store.DB, rueidis.Client, string, *auth.Authenticator) {
	t.Helper()
	db, err := store.Open(context.Background(), testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rc, prefix := testenv.Redis(t)
	authn, err := auth.New(strings.Repeat("s", 32), strings.Repeat("a", 32))
	if err != nil {
		t.Fatal(err)
	}
	return db, rc, prefix, authn
}

// newShop starts instances of the strategy; they stop when the test ends.
func newShop(t *testing.T, name string, instances int) *shop {
	t.Helper()
	return newShopWith(t, name, instances, false)
}

// newShopWith is newShop; with queue, each instance has the waiting room
// (package admission) as serve wires it: the routes, the pass on the
// order route, and admission running.
func newShopWith(t *testing.T, name string, instances int, queue bool) *shop {
	t.Helper()
	db, rc, prefix, authn := testBackends(t)
	ids := idgen.NewSlots(rc, "id", idgen.WithPrefix(prefix+"idgen:"))
	t.Cleanup(ids.Close)
	locks := lock.New(rc, lock.WithPrefix(prefix+"lock:"))
	t.Cleanup(func() { locks.Close() })
	s := &shop{auth: authn, auditor: lab.NewAuditor(db, rc, prefix), secret: []byte("the payment secret of the lab's tests"), db: db}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for range instances {
		var api httpapi.Server
		var life *lifecycle.Service
		if name == "async" {
			acfg := async.Config{Prefix: prefix, OrderIDs: ids}
			life = lifecycle.New(db, lifecycle.Config{Restocker: async.Returns(rc, acfg)})
			acfg.Lifecycle = life
			svc, err := async.NewService(rc, db, acfg)
			if err != nil {
				t.Fatal(err)
			}
			api.Vouchers, api.Orders = svc, svc
			consumer := consume.New(rc, db, consume.Config{Prefix: prefix, Audit: db})
			wg.Go(func() { _ = consumer.Run(ctx) })
		} else {
			life = lifecycle.New(db, lifecycle.Config{})
			orders, err := strategy.New(name, strategy.Config{DB: db, IDs: ids, Locks: locks, LockWait: 30 * time.Second, Lifecycle: life})
			if err != nil {
				t.Fatal(err)
			}
			api.Vouchers, api.Orders = strategy.NewVoucherService(db, ids, name), orders
		}
		wg.Go(func() { _ = life.Run(ctx, lifecycle.ExpirerConfig{}) })
		if queue {
			q := waitingRoom(t, rc, db, prefix, name)
			api.Admission, api.Orders = q, admission.Wrap(api.Orders, q)
			wg.Go(func() { _ = q.Run(ctx) })
		}
		api.Auth, api.PaymentSecret = authn, s.secret
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)
		s.urls = append(s.urls, srv.URL)
	}
	return s
}

// sale returns a Sale of the shop's strategy, named name, of stock units
// to users buyers sending requests order attempts.
func (s *shop) sale(name string, stock, users, requests int) *lab.Sale {
	return &lab.Sale{Strategy: name, Targets: s.urls, AdminToken: strings.Repeat("a", 32), Auth: s.auth, Auditor: s.auditor,
		Stock: stock, Users: users, Requests: requests, Doubles: 0.25, Seed: 1, Concurrency: 16, PaymentSecret: s.secret}
}

// checkExact fails the test unless the row's audit found nothing wrong.
func checkExact(t *testing.T, row lab.Row) {
	t.Helper()
	if !row.Exact() || row.Errors != 0 {
		t.Errorf("%s is not exact: %v\n%+v", row.Strategy, lab.Verdicts([]lab.Row{row}), row)
	}
}

// wantEnded is what every row of a sale with a payment window ends with:
// every unit paid, no payment after close.
func wantEnded(t *testing.T, row lab.Row) *lab.Lifecycle {
	t.Helper()
	lc := row.Lifecycle
	if lc == nil {
		t.Fatalf("%s: no lifecycle in %+v", row.Strategy, row)
	}
	if lc.Ended != lab.EndedPaid || lc.PaidUnits != row.Stock || lc.Unpaid != 0 || lc.PaidAfterClose != 0 || row.Units != row.Stock ||
		lc.PaymentUnits != lc.PaidUnits || len(lc.Refused) != 0 || lc.Errors != 0 {
		t.Errorf("%s: lifecycle %+v, sold %d of %d; want every unit paid, none after close", row.Strategy, *lc, row.Units, row.Stock)
	}
	return lc
}

// waitingRoom returns the waiting room of a shop of the strategy, counting
// units left as serve does: the gate's stock for async, MySQL's remaining
// for the others.
func waitingRoom(t *testing.T, rc rueidis.Client, db *store.DB, prefix, strategy string) *admission.Queue {
	t.Helper()
	units := func(ctx context.Context, id int64) (int, error) {
		v, err := db.Voucher(ctx, id)
		if err != nil {
			return 0, err
		}
		return v.Remaining, nil
	}
	if strategy == "async" {
		units = func(ctx context.Context, id int64) (int, error) {
			st, err := async.ReadState(ctx, rc, prefix, id)
			if err != nil || !st.Loaded {
				return 0, errors.Join(err, errors.New("the voucher is not in the gate"))
			}
			return st.Stock, nil
		}
	}
	q, err := admission.New(rc, admission.Config{Prefix: prefix, Secret: []byte(strings.Repeat("q", 32)), Vouchers: db, Units: units})
	if err != nil {
		t.Fatal(err)
	}
	return q
}
