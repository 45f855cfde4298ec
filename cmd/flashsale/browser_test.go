package main

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// chromium runs headless Chromium on url with args (--dump-dom,
// --screenshot=…) and returns its standard output. The browser and every
// process it starts run in their own process group, which is killed when
// chromium returns, so none outlives the test. A missing chromium fails the
// test.
func chromium(t *testing.T, url string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is needed for this test (apt-get install -y chromium): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(t.TempDir(), "profile"), "--virtual-time-budget=6000"}, append(args, url)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stderr = os.Stderr
	if !testing.Verbose() {
		cmd.Stderr = nil
	}
	out, err := cmd.Output()
	if cmd.Process != nil {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // helpers left behind
		deadline := time.Now().Add(5 * time.Second)
		for syscall.Kill(-pgid, 0) == nil { // killed processes linger until reaped by init
			if time.Now().After(deadline) {
				t.Errorf("chromium's process group %d is still alive", pgid)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return out
}

// screenshot renders url in headless Chromium into a PNG named name, and
// keeps a copy in $FLASHSALE_KEEP_SCREENSHOTS when that is set.
func screenshot(t *testing.T, url, name string) {
	t.Helper()
	shot := filepath.Join(t.TempDir(), name)
	chromium(t, url, "--screenshot="+shot, "--window-size=1280,900", "--hide-scrollbars")
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Fatalf("no screenshot: %v", err)
	}
	t.Logf("screenshot: %s", shot)
	if dir := os.Getenv("FLASHSALE_KEEP_SCREENSHOTS"); dir != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
}

// TestDashboardBrowser runs an async sale with a payment window among
// other vouchers, one upcoming (listed first: it begins last), one ended
// and one sold out earlier, the sale third in the list, and renders the
// dashboard in headless Chromium: it opens on the voucher selling now,
// badges each voucher, shows the sale's paid, awaiting and returned
// figures, fits the chart to the sale with MySQL's line under Redis's,
// reads nice ticks, and stays on the voucher ?voucher=ID names.
func TestDashboardBrowser(t *testing.T) {
	_, prefix := testenv.Redis(t)
	url, _ := startServe(t, "--strategy", "async", "--redis", "redis://"+testenv.RedisAddr()+"/0", "--redis-prefix", prefix,
		"--db", testenv.MySQLURL(t), "--payment-secret-file", paymentSecretFile(t))
	now := time.Now()
	create := func(title string, stock int, begin, end time.Duration, more string) string {
		var v struct{ ID string }
		body := fmt.Sprintf(`{"title":%q,"stock":%d,"begin_time":%q,"end_time":%q%s}`, title, stock,
			now.Add(begin).UTC().Format(time.RFC3339), now.Add(end).UTC().Format(time.RFC3339), more)
		if code := call(t, "POST", url+"/api/vouchers", serveAdmin, body, &v); code != http.StatusCreated {
			t.Fatalf("create voucher %s: %d", title, code)
		}
		return v.ID
	}
	upcoming := create("Upcoming", 10, time.Hour, 2*time.Hour, "")
	ended := create("Ended", 10, -40*time.Second, -10*time.Second, "")
	// 3 min: the chart fits it, with time to spare.
	selling := create("Selling", 20, -time.Minute, 2*time.Minute, `,"payment_window_seconds":600,"pay_value":500`)
	soldOut := create("Sold out", 1, -90*time.Second, time.Hour, "")
	order := func(voucher string, users ...int64) {
		for _, u := range users {
			call(t, "POST", url+"/api/vouchers/"+voucher+"/orders", userToken(t, u), "", nil)
		}
	}
	order(soldOut, 1, 2)
	waitStats(t, url+"/api/vouchers/"+soldOut+"/stats", 0)
	// After the sold-out voucher's sale was sampled: this one sold last.
	// Of its orders, one is paid, one cancelled, one awaits payment.
	paid, cancelled := placeOrder(t, url, selling, 1), placeOrder(t, url, selling, 2)
	placeOrder(t, url, selling, 3)
	if code := pay(t, url, paid, "pay-1", 500); code != http.StatusOK {
		t.Fatalf("pay order %s: %d", paid, code)
	}
	if code := call(t, "POST", url+"/api/orders/"+cancelled+"/cancel", userToken(t, 2), "", nil); code != http.StatusOK {
		t.Fatalf("cancel order %s: %d", cancelled, code)
	}
	waitStats(t, url+"/api/vouchers/"+selling+"/stats", 18) // 3 sold, 1 returned

	dom := string(chromium(t, url+"/dashboard", "--dump-dom"))
	statuses := map[string]string{}
	sel := ""
	for _, m := range regexp.MustCompile(`<li(?: class="(\w*)")? data-id="(\d+)" data-status="(\w+)"`).FindAllStringSubmatch(dom, -1) {
		statuses[m[2]] = m[3]
		if m[1] == "sel" {
			sel = m[2]
		}
	}
	want := map[string]string{upcoming: "upcoming", ended: "ended", selling: "on_sale", soldOut: "sold_out"}
	if fmt.Sprint(statuses) != fmt.Sprint(want) || sel != selling {
		t.Errorf("the list shows %v with %q selected; want %v with %s (selling) selected:\n%s", statuses, sel, want, selling, dom)
	}
	for _, want := range []string{
		`<span class="badge on_sale">on sale</span>`, `<span class="badge sold_out">sold out</span>`,
		`<span class="badge upcoming">upcoming</span>`, `<span class="badge ended">ended</span>`,
		`<span id="title">Selling</span>`, `id="left-mysql">18<`, `class="value" id="refused">0<`,
		`id="paid">1<`, `id="awaiting">1<`, `id="returned">1<`, `id="cancelled">1<`, `id="expired">0<`, `id="pending">0<`,
		"<code>/dashboard?voucher=ID</code>", ">begin</text>", ">end</text>", ">now</text>",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the dashboard has no %s:\n%s", want, dom)
		}
	}
	hiddenState := regexp.MustCompile(`data-state="(\w+)"[^>]*hidden=""`)
	if n := len(hiddenState.FindAllString(dom, -1)); n != 0 {
		t.Errorf("a voucher with a payment window hides %d of its order's states", n)
	}
	// The dumped DOM escapes the card's text: "< 1 ms" reads "&lt; 1 ms".
	if m := regexp.MustCompile(`id="latency">([^<]*)<`).FindStringSubmatch(dom); m == nil ||
		!regexp.MustCompile(`^(< 1 ms|[1-9][\d,.]* ms) · (< 1 ms|[1-9][\d,.]* ms)$`).MatchString(html.UnescapeString(m[1])) {
		t.Errorf("the latency card reads %v; want p50 · p99 in ms, under 1 ms as < 1 ms", m)
	}
	checkChart(t, dom)
	screenshot(t, url+"/dashboard", "dashboard-sale.png")
	// Without a payment window an order is final once created: no paid,
	// awaiting, cancelled, expired or returned card.
	dom = string(chromium(t, url+"/dashboard?voucher="+soldOut, "--dump-dom"))
	if n := len(hiddenState.FindAllString(dom, -1)); n != 5 || strings.Contains(dom, `data-state="async" hidden`) || !strings.Contains(dom, `id="orders">1<`) {
		t.Errorf("the voucher without a payment window hides %d of the 5 states of one, or shows no orders or pending:\n%s", n, dom)
	}

	dom = string(chromium(t, url+"/dashboard?voucher="+ended, "--dump-dom"))
	if !strings.Contains(dom, `<li class="sel" data-id="`+ended+`"`) || !strings.Contains(dom, "Staying on #"+ended) {
		t.Errorf("/dashboard?voucher=%s does not show that voucher:\n%s", ended, dom)
	}
}

// checkChart checks the chart of a voucher of stock 20 in dom: the stock
// axis reads 0, 5, 10, 15, 20; the time axis steps evenly by a nice step;
// MySQL's stock line is drawn first and wider, so Redis's shows over it.
func checkChart(t *testing.T, dom string) {
	t.Helper()
	var yticks []string
	for _, m := range regexp.MustCompile(`class="ytick"[^>]*>([^<]*)<`).FindAllStringSubmatch(dom, -1) {
		yticks = append(yticks, m[1])
	}
	if strings.Join(yticks, ",") != "0,5,10,15,20" {
		t.Errorf("stock ticks %v, want 0,5,10,15,20", yticks)
	}
	var xticks []time.Time
	for _, m := range regexp.MustCompile(`class="xtick"[^>]*>([^<]*)<`).FindAllStringSubmatch(dom, -1) {
		x, err := time.Parse("15:04:05", m[1])
		if err != nil {
			if x, err = time.Parse("15:04", m[1]); err != nil {
				t.Fatalf("time tick %q: %v", m[1], err)
			}
		}
		xticks = append(xticks, x)
	}
	if len(xticks) < 3 {
		t.Fatalf("time ticks %v: want at least 3", xticks)
	}
	step := xticks[1].Sub(xticks[0])
	for i := 1; i < len(xticks); i++ {
		if d := xticks[i].Sub(xticks[i-1]); d != step || !slices.Contains([]time.Duration{5, 10, 15, 30, 60}, d/time.Second) {
			t.Errorf("time ticks %v: not an even nice step", xticks)
			break
		}
	}
	// The accepted/s axis is ticked at each step from 0, and both axes
	// say what they measure.
	acc := regexp.MustCompile(`class="acctick"[^>]*>(\d+)/s<`).FindAllStringSubmatch(dom, -1)
	if len(acc) < 2 || acc[0][1] != "0" {
		t.Errorf("accepted/s ticks %v: want 0 and at least one more", acc)
	}
	for _, title := range []string{`class="ytitle"[^>]*>units left<`, `class="acctitle"[^>]*>accepted / s<`} {
		if !regexp.MustCompile(title).MatchString(dom) {
			t.Errorf("the chart has no axis title %s", title)
		}
	}
	mysql, redis := strings.Index(dom, `class="stock remaining_mysql"`), strings.Index(dom, `class="stock remaining_redis"`)
	if mysql < 0 || redis < mysql {
		t.Errorf("MySQL's stock line (at %d) is not drawn before Redis's (at %d)", mysql, redis)
	}
}

// TestDashboardQueueBrowser opens the dashboard in headless Chromium on a
// queue voucher three buyers joined before its start: the waiting room's
// cards show 3 waiting, none admitted of the voucher's 5/s, and the ETA
// of a ticket joining now; an open voucher shows no waiting room.
func TestDashboardQueueBrowser(t *testing.T) {
	_, prefix := testenv.Redis(t)
	url, _ := startServe(t, "--strategy", "async", "--redis", "redis://"+testenv.RedisAddr()+"/0", "--redis-prefix", prefix,
		"--db", testenv.MySQLURL(t))
	now := time.Now()
	create := func(title, more string) string {
		var v struct{ ID string }
		body := fmt.Sprintf(`{"title":%q,"stock":10,"begin_time":%q,"end_time":%q%s}`, title,
			now.Add(time.Hour).UTC().Format(time.RFC3339), now.Add(2*time.Hour).UTC().Format(time.RFC3339), more)
		if code := call(t, "POST", url+"/api/vouchers", serveAdmin, body, &v); code != http.StatusCreated {
			t.Fatalf("create voucher %s: %d", title, code)
		}
		return v.ID
	}
	queued, open := create("Queued", `,"admission":"queue","admit_per_second":5`), create("Open", "")
	for u := range int64(3) {
		if code := call(t, "POST", url+"/api/vouchers/"+queued+"/queue", userToken(t, u+1), "", nil); code != http.StatusOK {
			t.Fatalf("join the queue as user %d: %d", u+1, code)
		}
	}
	dom := string(chromium(t, url+"/dashboard?voucher="+queued, "--dump-dom"))
	for _, want := range []string{`<div class="cards queue" id="queue">`, `id="queue-waiting">3<`, `id="queue-rate">0 of 5<`,
		`id="queue-admitted">0<`, `id="queue-eta">1<`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the queue voucher's dashboard has no %s:\n%s", want, dom)
		}
	}
	screenshot(t, url+"/dashboard?voucher="+queued, "dashboard-queue.png")
	dom = string(chromium(t, url+"/dashboard?voucher="+open, "--dump-dom"))
	if !strings.Contains(dom, `<div class="cards queue" id="queue" hidden="">`) {
		t.Errorf("the open voucher's dashboard shows a waiting room:\n%s", dom)
	}
}
