package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// The fault tests run the async pipeline as real processes of this
// command on the real Redis and MariaDB, sell stock 500 to 2,000 buyers
// (two clicks each) through HTTP, break something mid-sale, and check
// that the outcome is exact: 500 orders, 500 buyers, no stock left on
// either side, and every order a buyer was told about persisted as
// created.
const (
	faultStock  = 500
	faultUsers  = 2000
	faultSecret = "fault-test-secret-fault-test-secret"
	faultAdmin  = "fault-admin-fault-admin-fault-admin"
)

// saleRig is one fault test's servers and buyers.
type saleRig struct {
	t        testing.TB
	bin      string
	dbURL    string
	redisURL string
	// redis and prefix: the rig's keys, deleted when the test ends.
	redis   rueidis.Client
	prefix  string
	auth    *auth.Authenticator
	dir     string
	client  *http.Client
	voucher int64
	n       atomic.Int32 // log file counter
	extra   []string     // more flags for serve
}

func newSaleRig(t testing.TB, dbURL string) *saleRig {
	t.Helper()
	a, err := auth.New(faultSecret, faultAdmin)
	if err != nil {
		t.Fatal(err)
	}
	rc, prefix := testenv.Redis(t)
	r := &saleRig{
		t: t, bin: buildFlashsale(t), dbURL: dbURL, redisURL: "redis://" + testenv.RedisAddr() + "/0",
		redis: rc, prefix: prefix,
		auth: a, dir: t.TempDir(),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	return r
}

// command returns a flashsale command line with the rig's backends.
func (r *saleRig) command(args ...string) *exec.Cmd {
	cmd := exec.Command(r.bin, append(args, "--redis", r.redisURL, "--redis-prefix", r.prefix, "--db", r.dbURL)...)
	cmd.Env = append(os.Environ(), "FLASHSALE_JWT_SECRET="+faultSecret, "FLASHSALE_ADMIN_TOKEN="+faultAdmin,
		"FLASHSALE_RATE_LIMIT_USER=0", "FLASHSALE_RATE_LIMIT_IP=0") // a crowd from one address
	return cmd
}

func (r *saleRig) logPath(name string) string {
	return filepath.Join(r.dir, fmt.Sprintf("%02d-%s.log", r.n.Add(1), name))
}

// serve starts an async instance; consume says whether it runs its own
// consumer.
func (r *saleRig) serve(consume bool) *lab.Process {
	r.t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--strategy", "async",
		"--consume=" + strconv.FormatBool(consume), "--claim-idle", "2s"}, r.extra...)
	p, err := lab.StartProcess(context.Background(), r.command(args...), r.logPath("serve"), 30*time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { p.Kill() })
	return p
}

// consume starts a consumer process.
func (r *saleRig) consume() *exec.Cmd {
	r.t.Helper()
	cmd := r.command("consume", "--claim-idle", "2s", "--batch", "50")
	f, err := os.Create(r.logPath("consume"))
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); f.Close() })
	return cmd
}

// createVoucher creates the sale's voucher through the first server.
func (r *saleRig) createVoucher(url string) { r.createStock(url, faultStock) }

// createStock creates the sale's voucher with the stock through a server.
func (r *saleRig) createStock(url string, stock int) { r.t.Helper(); r.createShards(url, stock, 1) }

// createShards creates the sale's voucher with the stock in shards.
func (r *saleRig) createShards(url string, stock, shards int) {
	r.t.Helper()
	body := fmt.Sprintf(`{"title":"fault sale","stock":%d,"shards":%d,"begin_time":%q,"end_time":%q}`, stock, shards,
		time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	var out struct{ ID string }
	if err := r.post(url+"/api/vouchers", faultAdmin, body, http.StatusCreated, &out); err != nil {
		r.t.Fatal(err)
	}
	id, err := strconv.ParseInt(out.ID, 10, 64)
	if err != nil {
		r.t.Fatal(err)
	}
	r.voucher = id
}

func (r *saleRig) post(url, token, body string, want int, out any) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		return fmt.Errorf("POST %s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// sale is what the buyers were told.
type sale struct {
	mu       sync.Mutex
	accepted map[int64]int64 // order id → user
	named    map[int64]int64 // order id a duplicate_order refusal named → user
	codes    map[string]int
	failures int // transport errors
}

// buy sends every buyer's two clicks, round robin over the targets that
// targets returns at the time of each request, 50 in flight. after is
// called once when `trigger` orders have been accepted.
func (r *saleRig) buy(s *sale, users []int64, targets func() []string, trigger int, after func()) {
	var once sync.Once
	jobs := make(chan int64)
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 50 {
		wg.Go(func() {
			for u := range jobs {
				tok, err := r.auth.UserToken(u, time.Hour)
				if err != nil {
					r.t.Error(err)
					return
				}
				for range 2 {
					ts := targets()
					r.click(s, u, tok, ts[int(seq.Add(1))%len(ts)])
					s.mu.Lock()
					n := len(s.accepted)
					s.mu.Unlock()
					if n >= trigger && after != nil {
						once.Do(after)
					}
				}
			}
		})
	}
	for _, u := range users {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
}

// click sends one order of user u to the server at url and records the
// answer in s; it returns the status (0: a transport error).
func (r *saleRig) click(s *sale, u int64, tok, url string) int {
	var out struct {
		OrderID string `json:"order_id"`
		Error   struct{ Code, Message string }
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/vouchers/%d/orders", url, r.voucher), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := r.client.Do(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failures++
		return 0
	}
	derr := json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if res.StatusCode == http.StatusOK && derr == nil {
		id, _ := strconv.ParseInt(out.OrderID, 10, 64)
		s.accepted[id] = u
	} else {
		s.codes[out.Error.Code]++
		if id := namedOrder(out.Error.Message); out.Error.Code == flashsale.EDuplicateOrder && id != 0 && s.named != nil {
			s.named[id] = u
		}
	}
	return res.StatusCode
}

// liveTargets are the servers the buyers send to, changed mid-sale.
type liveTargets struct {
	mu   sync.Mutex
	urls []string
}

func newTargets(urls ...string) *liveTargets { return &liveTargets{urls: urls} }

// get returns the servers now (buy's targets).
func (l *liveTargets) get() []string { l.mu.Lock(); defer l.mu.Unlock(); return l.urls }

// set replaces the servers.
func (l *liveTargets) set(urls ...string) { l.mu.Lock(); defer l.mu.Unlock(); l.urls = urls }

// namedOrder returns the order id a refusal's message names, or 0.
func namedOrder(msg string) int64 {
	for f := range strings.FieldsSeq(msg) {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil {
			return id
		}
	}
	return 0
}

func userRange(first, last int64) []int64 {
	us := make([]int64, 0, last-first+1)
	for u := first; u <= last; u++ {
		us = append(us, u)
	}
	return us
}

// check waits for the pipeline to drain and checks the outcome.
func (r *saleRig) check(s *sale) { r.t.Helper(); r.checkStock(s, faultStock) }

// checkStock is check for a voucher of that stock.
func (r *saleRig) checkStock(s *sale, faultStock int) {
	r.t.Helper()
	ctx := context.Background()
	rc := r.redis
	db, err := store.Open(ctx, r.dbURL)
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	if err := lab.NewAuditor(db, rc, r.prefix).Drain(ctx, r.voucher, 60*time.Second); err != nil {
		r.t.Fatal(err)
	}
	st, err := async.ReadState(ctx, rc, r.prefix, r.voucher)
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := db.AuditVoucher(ctx, r.voucher)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("told accepted %d, refused %v, transport errors %d; Redis %+v; MySQL %+v", len(s.accepted), s.codes, s.failures, st, a)
	if st.Held != faultStock || st.Stock != 0 || st.DeadLetters != 0 {
		r.t.Errorf("Redis: %+v; want %d buyers, no stock left, no dead letters", st, faultStock)
	}
	if a.Orders != faultStock || a.DistinctBuyers != faultStock || a.DuplicateBuyers != 0 || a.Remaining != 0 {
		r.t.Errorf("MySQL: %+v; want %d orders by %d buyers, none left", a, faultStock, faultStock)
	}
	if len(s.accepted) > faultStock {
		r.t.Errorf("%d orders accepted for stock %d", len(s.accepted), faultStock)
	}
	for id, user := range s.accepted {
		o, err := db.FindOrder(ctx, id)
		if err != nil || o.UserID != user || o.Status != flashsale.StatusCreated {
			r.t.Fatalf("accepted order %d of user %d: %+v, %v; want it created", id, user, o, err)
		}
	}
}

// TestFaultConsumerKilledMidSale: the consumer process is killed with
// SIGKILL mid-sale and a new one is started.
func TestFaultConsumerKilledMidSale(t *testing.T) {
	r := newSaleRig(t, testenv.MySQLURL(t))
	srv := r.serve(false)
	r.createVoucher(srv.URL)
	first := r.consume()
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, userRange(1, faultUsers), func() []string { return []string{srv.URL} }, faultStock/3, func() {
		_ = first.Process.Kill()
		r.consume()
	})
	if s.failures != 0 || len(s.accepted) != faultStock {
		t.Fatalf("%d accepted, %d transport errors; want %d and none", len(s.accepted), s.failures, faultStock)
	}
	r.check(s)
}

// TestFaultMySQLStoppedMidSale: MySQL is stopped for 10 s mid-sale; the
// gate keeps selling, the orders wait in Redis, /readyz answers 503 (and,
// anyone may ask it, shows no backlog).
func TestFaultMySQLStoppedMidSale(t *testing.T) {
	maria := testenv.StartMariaDB(t)
	r := newSaleRig(t, maria.URL())
	srv := r.serve(true)
	r.createVoucher(srv.URL)
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	var stopped time.Time
	r.buy(s, userRange(1, faultUsers), func() []string { return []string{srv.URL} }, faultStock/3, func() {
		maria.Stop()
		stopped = time.Now()
	})
	var ready map[string]any
	res, err := r.client.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(res.Body).Decode(&ready)
	res.Body.Close()
	if _, ok := ready["backlog"]; res.StatusCode != http.StatusServiceUnavailable || ok {
		t.Errorf("/readyz while MySQL is down: %d %v; want 503 and no backlog", res.StatusCode, ready)
	}
	time.Sleep(time.Until(stopped.Add(10 * time.Second)))
	maria.Start()
	if s.failures != 0 || len(s.accepted) != faultStock {
		t.Fatalf("%d accepted, %d transport errors; want %d and none", len(s.accepted), s.failures, faultStock)
	}
	r.check(s)
}

// TestFaultInstanceKilledMidSale: one of two instances (gate and consumer)
// is killed with SIGKILL mid-sale; the other finishes the sale and takes
// over what the dead one's consumer left unacknowledged.
func TestFaultInstanceKilledMidSale(t *testing.T) {
	r := newSaleRig(t, testenv.MySQLURL(t))
	a, b := r.serve(true), r.serve(true)
	r.createVoucher(a.URL)
	live := newTargets(a.URL, b.URL)
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, userRange(1, faultUsers), live.get, faultStock/3, func() {
		b.Kill()
		live.set(a.URL)
	})
	// Buyers whose request died with b try again, as people do.
	r.buy(s, userRange(1, faultUsers), live.get, faultStock+1, nil)
	r.check(s)
}
