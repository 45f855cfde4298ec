package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// hostileRig is a real serve process (async, with the shipped defaults:
// rate limits on; --trust-proxy, so each client of the test has an
// address of its own) on real Redis and MariaDB, a voucher on sale, and
// what the test reads back.
type hostileRig struct {
	t       *testing.T
	url     string
	auth    *auth.Authenticator
	rc      rueidis.Client
	prefix  string
	db      *store.DB
	client  *http.Client
	voucher string
}

func newHostileRig(t *testing.T) *hostileRig {
	t.Helper()
	bin := buildFlashsale(t)
	rc, prefix := testenv.Redis(t)
	dbURL := testenv.MySQLURL(t)
	dir := t.TempDir()
	secrets := map[string]string{"jwt.secret": faultSecret, "admin.token": faultAdmin}
	for name, s := range secrets {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--strategy", "async", "--trust-proxy",
		"--jwt-secret-file", filepath.Join(dir, "jwt.secret"), "--admin-token-file", filepath.Join(dir, "admin.token"))
	cmd.Env = append(os.Environ(), "FLASHSALE_REDIS=redis://"+testenv.RedisAddr()+"/0", "FLASHSALE_REDIS_PREFIX="+prefix, "FLASHSALE_DB="+dbURL)
	p, err := lab.StartProcess(context.Background(), cmd, filepath.Join(dir, "serve.log"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	a, err := auth.New(faultSecret, faultAdmin)
	if err != nil {
		t.Fatal(err)
	}
	r := &hostileRig{t: t, url: p.URL, auth: a, rc: rc, prefix: prefix, db: db,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	body := strings.TrimSuffix(voucherBody(100000), "}") + `,"limit_per_buyer":2,"payment_window_seconds":600}`
	code, data, _ := r.do("POST", "/api/vouchers", "192.0.2.1", faultAdmin, body)
	var v struct{ ID string }
	if err := json.Unmarshal(data, &v); code != http.StatusCreated || err != nil {
		t.Fatalf("create voucher: %d %s", code, data)
	}
	r.voucher = v.ID
	return r
}

// do sends a request from the client address from, with the bearer token
// (none when empty) and header pairs, and returns the status, the body and
// how long the answer took; a transport error is status 0.
func (r *hostileRig) do(method, path, from, token, body string, header ...string) (int, []byte, time.Duration) {
	req, err := http.NewRequest(method, r.url+path, strings.NewReader(body))
	if err != nil {
		r.t.Error(err)
		return 0, nil, 0
	}
	req.Header.Set("X-Forwarded-For", from)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	start := time.Now()
	res, err := r.client.Do(req)
	if err != nil {
		return 0, nil, time.Since(start)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, data, time.Since(start)
}

// token returns user's token.
func (r *hostileRig) token(user int64) string {
	tok, err := r.auth.UserToken(user, time.Hour)
	if err != nil {
		r.t.Fatal(err)
	}
	return tok
}

// buyers has n buyers from user first on, each from an address of its
// own, order once each, 6 at a time, and returns the orders' ids and the
// answers' latencies; every order must be accepted.
func (r *hostileRig) buyers(first int64, n int) ([]int64, []time.Duration) {
	var mu sync.Mutex
	var ids []int64
	var lat []time.Duration
	jobs := make(chan int64)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for u := range jobs {
				from := fmt.Sprintf("10.%d.%d.%d", u>>16&255, u>>8&255, u&255)
				code, data, took := r.do("POST", "/api/vouchers/"+r.voucher+"/orders", from, r.token(u), "")
				var o struct {
					OrderID int64 `json:"order_id,string"`
				}
				if err := json.Unmarshal(data, &o); code != http.StatusOK || err != nil {
					r.t.Errorf("buyer %d: %d %s", u, code, data)
					continue
				}
				mu.Lock()
				ids, lat = append(ids, o.OrderID), append(lat, took)
				mu.Unlock()
			}
		})
	}
	for u := first; u < first+int64(n); u++ {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
	return ids, lat
}

// p99 returns the 99th percentile of d.
func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(math.Ceil(0.99*float64(len(s))))-1]
}

// TestHostileClients: while attackers try to stall, fill and slow a sale
// (below), the sale's other buyers are unaffected: each of their orders is
// accepted and reaches MySQL, their p99 stays within 2x of a quiet run's
// (measured in this test, with a tolerance for a loaded machine), and the
// attackers' keys in Redis stay bounded. Every answer an attacker gets is
// a 4xx: none is a server error.
func TestHostileClients(t *testing.T) {
	r := newHostileRig(t)
	r.buyers(1, 30) // warm up: connections, the consumer's stream
	quietIDs, quiet := r.buyers(1000, 150)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	counts := make([]map[int]int, len(hostileAttacks))
	for i, attack := range hostileAttacks {
		counts[i] = map[int]int{}
		wg.Go(func() {
			// Each attacker is one client sending round after round (a
			// few hundred requests a second): what one account or
			// address sends, not a share of the test machine's CPU.
			for n := 0; ctx.Err() == nil; n++ {
				for _, code := range attack.run(r, n) {
					counts[i][code]++
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the attacks under way
	hostileIDs, hostile := r.buyers(2000, 150)
	stop()
	wg.Wait()
	for i, attack := range hostileAttacks {
		t.Logf("attack %s: answers %v", attack.name, counts[i])
		for code := range counts[i] {
			if code < 400 && !attack.accepted || code >= 500 || code == 0 {
				t.Errorf("attack %s: got %d (answers %v)", attack.name, code, counts[i])
			}
		}
	}
	qp, hp := p99(quiet), p99(hostile)
	t.Logf("p99 of the innocent buyers: quiet %v, under attack %v (ratio %.2f)", qp, hp, float64(hp)/float64(qp))
	// The tolerance: the attackers and the buyers share the test
	// machine's 2 cores with the server (and, in CI, with other tests).
	if hp > 2*qp && hp-qp > 300*time.Millisecond {
		t.Errorf("p99 under attack %v, more than twice the quiet run's %v", hp, qp)
	}
	r.wantInMySQL(append(quietIDs, hostileIDs...))
	r.wantRedisBounded()
}

// wantInMySQL waits until every order of ids is live in MySQL.
func (r *hostileRig) wantInMySQL(ids []int64) {
	r.t.Helper()
	vid, _ := parseInt(r.voucher)
	deadline := time.Now().Add(20 * time.Second)
	for {
		stored, err := r.db.OrderIDs(context.Background(), vid)
		if err != nil {
			r.t.Fatal(err)
		}
		missing := 0
		for _, id := range ids {
			if _, ok := slices.BinarySearch(stored, id); !ok {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d of the innocent buyers' %d orders never reached MySQL", missing, len(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantRedisBounded checks the keys the attack left in Redis: no account
// holds more Idempotency-Keys of a voucher than the bound, and none are
// kept for vouchers that do not exist.
func (r *hostileRig) wantRedisBounded() {
	r.t.Helper()
	keys, err := r.rc.Do(context.Background(), r.rc.B().Keys().Pattern(r.prefix+"*:idem:*").Build()).AsStrSlice()
	if err != nil {
		r.t.Fatal(err)
	}
	perBuyer := map[string]int{}
	for _, k := range keys {
		tag, rest, _ := strings.Cut(k, "}:idem:")
		if !strings.Contains(tag, r.voucher) {
			r.t.Errorf("an idempotency key of another voucher was kept: %s", k)
		}
		user, _, _ := strings.Cut(rest, ":")
		perBuyer[user]++
	}
	for user, n := range perBuyer {
		if n > 64 {
			r.t.Errorf("buyer %s holds %d idempotency keys; the bound is 64", user, n)
		}
	}
	r.t.Logf("idempotency keys in Redis: %d, of %d buyers", len(keys), len(perBuyer))
}

func parseInt(s string) (int64, error) {
	var n int64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// hostileAttack is one attacker's loop: run sends its n-th round and
// returns the statuses it got.
type hostileAttack struct {
	name string
	// accepted: the attacker is a buyer whose orders may be accepted.
	accepted bool
	run      func(r *hostileRig, n int) []int
}

// hostileAttacks are the attackers, each from an address of its own.
var hostileAttacks = []hostileAttack{
	{"stall: one buyer's keys differing in case, order and cancel", true, attackStall},
	{"fill: floods of distinct keys, unknown vouchers", true, attackFill},
	{"tokens: forged, oversized, confusing; admin guesses", false, attackTokens},
	{"malformed bodies, headers and paths", false, attackMalformed},
	{"floods of tickets and cursors", false, attackFloods},
}

// attackStall orders twice with keys that differ in case only (the limit
// is 2), then cancels both, so MySQL's unique key would see them clash.
func attackStall(r *hostileRig, n int) []int {
	const from = "203.0.113.1"
	tok := r.token(900001)
	var codes []int
	for _, key := range []string{fmt.Sprintf("key%d", n), fmt.Sprintf("KEY%d", n)} {
		code, data, _ := r.do("POST", "/api/vouchers/"+r.voucher+"/orders", from, tok, "", "Idempotency-Key", key)
		codes = append(codes, code)
		var o struct {
			OrderID string `json:"order_id"`
		}
		if code == http.StatusOK && json.Unmarshal(data, &o) == nil {
			c, _, _ := r.do("POST", "/api/orders/"+o.OrderID+"/cancel", from, tok, "")
			codes = append(codes, c)
		}
	}
	return codes
}

// attackFill sends a new Idempotency-Key each time, on the voucher and on
// vouchers that do not exist.
func attackFill(r *hostileRig, n int) []int {
	const from = "203.0.113.2"
	tok := r.token(900002)
	c1, _, _ := r.do("POST", "/api/vouchers/"+r.voucher+"/orders", from, tok, `{"quantity":1}`, "Idempotency-Key", fmt.Sprintf("fill-%d-%d", n, rand.Int64()))
	c2, _, _ := r.do("POST", fmt.Sprintf("/api/vouchers/%d/orders", 1+rand.Int64N(1<<62)), from, tok, "", "Idempotency-Key", fmt.Sprint("x", n))
	return []int{c1, c2}
}

// attackTokens sends tokens that are not the service's.
func attackTokens(r *hostileRig, n int) []int {
	const from = "203.0.113.3"
	b64 := base64.RawURLEncoding.EncodeToString
	valid := r.token(900003)
	parts := strings.Split(valid, ".")
	forged := []string{
		b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(`{"sub":"1","exp":9999999999}`)) + ".",
		parts[0] + "." + b64([]byte(`{"sub":"900004","exp":9999999999}`)) + "." + parts[2],
		valid + strings.Repeat("A", 5000),
		"a b c",
		strings.Repeat(".", 100),
		fmt.Sprintf("admin-guess-%040d", n),
	}
	var codes []int
	for _, tok := range forged {
		c, _, _ := r.do("POST", "/api/vouchers/"+r.voucher+"/orders", from, tok, "")
		codes = append(codes, c)
	}
	c, _, _ := r.do("POST", "/api/vouchers", from, forged[len(forged)-1], voucherBody(1))
	return append(codes, c)
}

// attackMalformed sends a buyer's orders with bodies, headers and paths
// that are not what the API takes.
func attackMalformed(r *hostileRig, n int) []int {
	const from = "203.0.113.4"
	tok := r.token(900005)
	orders := "/api/vouchers/" + r.voucher + "/orders"
	var codes []int
	for _, body := range []string{`{"Quantity":1}`, `{"quantity":1,"quantity":2}`, "{\"quantity\":\xff}", `{"quantity":1e3}`, `[1]`, strings.Repeat(" ", 70<<10) + "{}"} {
		c, _, _ := r.do("POST", orders, from, tok, body)
		codes = append(codes, c)
	}
	for _, key := range []string{"caf\u00e9", "a b", strings.Repeat("k", 300), "k\xff"} {
		c, _, _ := r.do("POST", orders, from, tok, "", "Idempotency-Key", key)
		codes = append(codes, c)
	}
	for _, path := range []string{"/api/vouchers/007/orders", "/api/vouchers/99999999999999999999/orders", "/api/vouchers/%2e%2e/orders", "/api/orders/-1/cancel"} {
		c, _, _ := r.do("POST", path, from, tok, "")
		codes = append(codes, c)
	}
	return codes
}

// attackFloods joins the queue of an open voucher, polls tickets and
// pages with cursors that were never handed out.
func attackFloods(r *hostileRig, n int) []int {
	const from = "203.0.113.5"
	tok := r.token(900006)
	c1, _, _ := r.do("POST", "/api/vouchers/"+r.voucher+"/queue", from, tok, "")
	c2, _, _ := r.do("GET", fmt.Sprintf("/api/vouchers/%s/queue/t%d", r.voucher, rand.Int64()), from, tok, "")
	c3, _, _ := r.do("GET", fmt.Sprintf("/api/vouchers?cursor=%x", rand.Int64()), from, "", "")
	c4, _, _ := r.do("GET", fmt.Sprintf("/api/vouchers/%d", 1+rand.Int64N(1<<62)), from, "", "")
	return []int{c1, c2, c3, c4}
}
