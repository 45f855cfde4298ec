package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// xssTitle is a voucher title that would run script if the page parsed it
// as HTML.
const xssTitle = `<img src=x onerror=alert(1)>`

// TestSaleObserved runs a small async sale on real Redis and MariaDB and
// checks what watches it: the Prometheus scrape on --metrics-addr (valid
// by promtool, with the orders' outcomes, the invariants and every metric
// the alert rules and the Grafana dashboard use), pprof there and no
// /metrics on the main listener, the stats endpoint's public and admin
// views, and the dashboard rendered in headless Chromium.
func TestSaleObserved(t *testing.T) {
	_, prefix := testenv.Redis(t)
	metricsAddr := freeAddr(t)
	url, _ := startServe(t, "--strategy", "async", "--redis", "redis://"+testenv.RedisAddr()+"/0", "--redis-prefix", prefix,
		"--db", testenv.MySQLURL(t), "--metrics-addr", metricsAddr, "--pprof")
	var v struct{ ID string }
	body := fmt.Sprintf(`{"title":%q,"stock":20,"begin_time":%q,"end_time":%q}`, xssTitle,
		time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, body, &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	orders := url + "/api/vouchers/" + v.ID + "/orders"
	for u := int64(1); u <= 8; u++ {
		if code := call(t, "POST", orders, userToken(t, u), "", nil); code != http.StatusOK {
			t.Fatalf("order of user %d: %d", u, code)
		}
	}
	if code := call(t, "POST", orders, userToken(t, 1), "", nil); code != http.StatusConflict {
		t.Fatalf("second order of user 1: %d, want 409", code)
	}
	if code := call(t, "POST", orders, "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("order without a token: %d, want 401", code)
	}
	stats := waitStats(t, url+"/api/vouchers/"+v.ID+"/stats", 12)

	t.Run("metrics", func(t *testing.T) { checkScrape(t, url, metricsAddr, v.ID) })
	t.Run("stats", func(t *testing.T) {
		if _, ok := stats["backlog"]; ok {
			t.Errorf("the public stats show the backlog: %v", stats)
		}
		var admin struct{ Voucher map[string]any }
		call(t, "GET", url+"/api/vouchers/"+v.ID+"/stats", serveAdmin, "", &admin)
		if admin.Voucher["backlog"] != 0.0 || admin.Voucher["oversold"] != 0.0 || admin.Voucher["dead_letters"] != 0.0 {
			t.Errorf("admin stats: %v, want backlog, oversold and dead letters 0", admin.Voucher)
		}
		var e struct{ Error struct{ Code string } }
		if code := call(t, "GET", url+"/api/vouchers/12345/stats", "", "", &e); code != http.StatusNotFound || e.Error.Code != "not_found" {
			t.Errorf("stats of an unknown voucher: %d %+v", code, e)
		}
	})
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, url, v.ID) })
}

// waitStats polls the public stats until MySQL's remaining stock is want
// and Redis agrees, and returns the voucher's figures.
func waitStats(t *testing.T, url string, want float64) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s struct{ Voucher map[string]any }
		code := call(t, "GET", url, "", "", &s)
		if code == http.StatusOK && s.Voucher["remaining_mysql"] == want && s.Voucher["remaining_redis"] == want {
			return s.Voucher
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never showed %v left in MySQL and Redis: %d %v", want, code, s.Voucher)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkScrape scrapes the metrics listener and checks the scrape.
func checkScrape(t *testing.T, url, metricsAddr, voucher string) {
	if code := call(t, "GET", url+"/metrics", "", "", nil); code != http.StatusNotFound {
		t.Errorf("/metrics on the main listener with --metrics-addr: %d, want 404", code)
	}
	if res, err := http.Get("http://" + metricsAddr + "/debug/pprof/"); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("pprof on --metrics-addr: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	scrape := get(t, "http://"+metricsAddr+"/metrics")
	promtool(t, scrape, "check", "metrics")
	for _, want := range []string{
		`flashsale_orders_total{outcome="accepted",strategy="async"} 8`,
		`flashsale_orders_total{outcome="duplicate_order",strategy="async"} 1`,
		`flashsale_orders_total{outcome="invalid",strategy="async"} 1`,
		`flashsale_orders_total{outcome="sold_out",strategy="async"} 0`,
		`flashsale_http_requests_total{code="200",route="POST /api/vouchers/{id}/orders"} 8`,
		`flashsale_http_requests_total{code="401",route="POST /api/vouchers/{id}/orders"} 1`,
		`flashsale_voucher_oversold{voucher="` + voucher + `"} 0`,
		`flashsale_voucher_remaining{store="mysql",voucher="` + voucher + `"} 12`,
		`flashsale_voucher_remaining{store="redis",voucher="` + voucher + `"} 12`,
		`flashsale_voucher_stock_drift{check="redis",voucher="` + voucher + `"} 0`,
		`flashsale_async_orders_persisted_total 8`,
		`flashsale_order_gate_duration_seconds_count{strategy="async"} 9`,
		`flashsale_build_info{`,
	} {
		if !strings.Contains(scrape, want+"\n") && !strings.Contains(scrape, want) {
			t.Errorf("the scrape has no %s", want)
		}
	}
	// The lock's metrics are checked by TestLockSaleObserved.
	checkDeployNames(t, scrape, func(name string) bool { return !strings.HasPrefix(name, lockMetrics) })
}

// lockMetrics prefixes the metrics only --strategy lock exports.
const lockMetrics = "flashsale_lock_"

// checkDeployNames checks that every metric the alert rules and the
// Grafana dashboard use, among those mine selects, is in scrape.
func checkDeployNames(t *testing.T, scrape string, mine func(name string) bool) {
	t.Helper()
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(flashsale_\w+)`).FindAllStringSubmatch(scrape, -1) {
		names[m[1]] = true
	}
	for _, f := range []string{"alerts.yml", "grafana-dashboard.json"} {
		text, err := os.ReadFile(filepath.Join("..", "..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range regexp.MustCompile(`flashsale_\w+`).FindAllString(string(text), -1) {
			if mine(n) && !names[n] {
				t.Errorf("deploy/%s uses %s, which the service does not export", f, n)
			}
		}
	}
}

// TestLockSaleObserved runs a sale with --strategy lock on real Redis and
// MariaDB, 12 buyers and one buyer's 4 clicks at once, and checks the lock
// client's metrics in the scrape: one acquisition per order attempt (15),
// each a turn or a local handoff, each Lock's wait in the histogram, none
// lost; and every lock metric the alert rules and the dashboard use.
func TestLockSaleObserved(t *testing.T) {
	_, prefix := testenv.Redis(t)
	url, _ := startServe(t, "--strategy", "lock", "--lock-wait", "30s", "--redis", "redis://"+testenv.RedisAddr()+"/0",
		"--redis-prefix", prefix, "--db", testenv.MySQLURL(t), "--public-metrics")
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(5), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	orders := url + "/api/vouchers/" + v.ID + "/orders"
	var wg sync.WaitGroup
	for u := int64(1); u <= 15; u++ {
		tok := userToken(t, max(u-3, 1)) // users 1 to 12; user 1 four times
		wg.Go(func() { call(t, "POST", orders, tok, "", nil) })
	}
	wg.Wait()
	scrape := get(t, url+"/metrics")
	promtool(t, scrape, "check", "metrics")
	sample := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(scrape)
		if m == nil {
			t.Fatalf("the scrape has no %s:\n%s", name, scrape)
		}
		f, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	acquired, turns, handoffs := sample("flashsale_lock_acquisitions_total"), sample("flashsale_lock_turns_total"), sample("flashsale_lock_local_handoffs_total")
	if acquired != 15 || turns+handoffs != 15 || turns < 12 {
		t.Errorf("lock acquisitions %v, turns %v, local handoffs %v: want 15 acquisitions, at least 12 turns (one per buyer)", acquired, turns, handoffs)
	}
	if n, sum := sample("flashsale_lock_wait_seconds_count"), sample("flashsale_lock_wait_seconds_sum"); n != 15 || !(sum > 0) {
		t.Errorf("lock waits: count %v, sum %v; want 15 and more than 0", n, sum)
	}
	if lost := sample("flashsale_lock_lost_total"); lost != 0 {
		t.Errorf("%v locks lost in a sale with Redis up", lost)
	}
	if accepted := sample(`flashsale_orders_total{outcome="accepted",strategy="lock"}`); accepted != 5 {
		t.Errorf("%v orders accepted, want the stock, 5", accepted)
	}
	checkDeployNames(t, scrape, func(name string) bool { return strings.HasPrefix(name, lockMetrics) })
}

// checkDashboard renders the dashboard in headless Chromium.
func checkDashboard(t *testing.T, url, voucher string) {
	page := url + "/dashboard?voucher=" + voucher
	dom := string(chromium(t, page, "--dump-dom"))
	if !strings.Contains(dom, `id="left-mysql">12<`) {
		t.Errorf("the dashboard does not show 12 left in MySQL:\n%s", dom)
	}
	if !strings.Contains(dom, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the dashboard does not show the title as text:\n%s", dom)
	}
	if regexp.MustCompile(`(?i)<img[^>]*onerror`).MatchString(dom) {
		t.Errorf("the title became an img element:\n%s", dom)
	}
	screenshot(t, page, "dashboard.png")
}

// promtool runs promtool with args on input and fails the test if it
// finds a problem or is missing.
func promtool(t *testing.T, input string, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed for this test (apt-get install -y prometheus): %v", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %v: %v\n%s", args, err, out)
	}
}

// TestAlertRules checks deploy/alerts.yml with promtool, and runs its
// unit tests (deploy/alerts_test.yml: the oversold, stalled consumer and
// 5xx alerts fire on made-up series).
func TestAlertRules(t *testing.T) {
	promtool(t, "", "check", "rules", filepath.Join("..", "..", "deploy", "alerts.yml"))
	promtool(t, "", "test", "rules", filepath.Join("..", "..", "deploy", "alerts_test.yml"))
}

// TestMetricsOnMainListener: with --public-metrics, /metrics is served
// on the main listener and pprof is not; and an oversell (naive, with a
// race window) shows in flashsale_voucher_oversold.
func TestMetricsOnMainListener(t *testing.T) {
	url, _ := startServe(t, "--strategy", "naive", "--race-window", "50ms", "--public-metrics")
	if code := call(t, "GET", url+"/debug/pprof/", "", "", nil); code != http.StatusNotFound {
		t.Errorf("pprof on the main listener: %d, want 404", code)
	}
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(2), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	var wg sync.WaitGroup
	for u := int64(1); u <= 20; u++ {
		tok := userToken(t, u)
		wg.Go(func() { call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", tok, "", nil) })
	}
	wg.Wait()
	oversold := regexp.MustCompile(`flashsale_voucher_oversold\{voucher="` + v.ID + `"\} ([1-9]\d*)`)
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := get(t, url+"/metrics")
		if oversold.MatchString(s) && strings.Contains(s, "flashsale_build_info") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no oversold voucher %s in /metrics:\n%s", v.ID, s)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return string(b)
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestConsumeMetrics runs an async instance without its consumer, takes 6
// orders, then runs `flashsale consume --metrics-addr` and scrapes it: the
// consumer's counters show the 6 orders persisted, the batches are
// measured, its expirer's counters are there, pprof is served, no order
// series is (consume takes none), and the listener goes away with the
// consumer.
func TestConsumeMetrics(t *testing.T) {
	_, prefix := testenv.Redis(t)
	servers := []string{"--redis", "redis://" + testenv.RedisAddr() + "/0", "--redis-prefix", prefix, "--db", testenv.MySQLURL(t)}
	url, _ := startServe(t, append([]string{"--strategy", "async", "--consume=false"}, servers...)...)
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(10), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	for u := int64(1); u <= 6; u++ {
		if code := call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", userToken(t, u), "", nil); code != http.StatusOK {
			t.Fatalf("order of user %d: %d", u, code)
		}
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"consume", "--metrics-addr", addr, "--pprof"}, servers...), io.Discard, io.Discard)
	}()
	defer func() { cancel(); <-done }()
	var scrape string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/metrics"); err == nil {
			res.Body.Close()
			if scrape = get(t, "http://"+addr+"/metrics"); strings.Contains(scrape, "\nflashsale_async_orders_persisted_total 6\n") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("consume's scrape never showed 6 orders persisted:\n%s", scrape)
		}
	}
	promtool(t, scrape, "check", "metrics")
	if !regexp.MustCompile(`(?m)^flashsale_async_batch_size_count [1-9]`).MatchString(scrape) ||
		!regexp.MustCompile(`(?m)^flashsale_async_batches_total [1-9]`).MatchString(scrape) {
		t.Errorf("consume's scrape has no batch persisted:\n%s", scrape)
	}
	if strings.Contains(scrape, "flashsale_orders_total{") || strings.Contains(scrape, "flashsale_payments_total{") {
		t.Errorf("consume, which takes no orders, exports order or payment series:\n%s", scrape)
	}
	for _, expirer := range []string{"flashsale_orders_expired_total 0", "flashsale_returned_units_total 0", "flashsale_order_expiry_lag_seconds_count 0"} {
		if !strings.Contains(scrape, "\n"+expirer+"\n") {
			t.Errorf("consume's scrape lacks its expirer's %s:\n%s", expirer, scrape)
		}
	}
	if res, err := http.Get("http://" + addr + "/debug/pprof/"); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("pprof on consume's --metrics-addr: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("consume: %v", err)
	}
	done <- nil // for the deferred wait
	if res, err := http.Get("http://" + addr + "/metrics"); err == nil {
		res.Body.Close()
		t.Errorf("consume's metrics listener outlived it: %d", res.StatusCode)
	}
}
