package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestServeLogsItsSetup: on real servers without --admin-token, serve
// warns that admin routes answer 401, logs the backends it connected to
// (the password hidden) and its strategy, and prints one line when it
// stops, counting its answers.
func TestServeLogsItsSetup(t *testing.T) {
	_, prefix := testenv.Redis(t)
	dbURL := testenv.MySQLURL(t)
	var logs, out testenv.Buffer
	url, stop := runServe(t, &logs, &out, "--jwt-secret", serveSecret, "--strategy", "lock",
		"--redis", "redis://:hunter2@"+testenv.RedisAddr()+"/0", "--redis-prefix", prefix, "--db", dbURL)
	if code := call(t, "POST", url+"/api/vouchers", "", voucherBody(1), nil); code != http.StatusUnauthorized {
		t.Errorf("create voucher without an admin token: %d, want 401", code)
	}
	if code := call(t, "GET", url+"/healthz", "", "", nil); code != http.StatusOK {
		t.Errorf("healthz: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	log := logs.String()
	for _, want := range []string{
		`level=WARN msg="no --admin-token: every admin route (POST /api/vouchers) will answer 401"`,
		"level=INFO msg=connected redis=redis://:xxxxx@" + testenv.RedisAddr() + "/0 redis_prefix=" + prefix,
		"strategy=lock",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "hunter2") {
		t.Errorf("the log shows the Redis password:\n%s", log)
	}
	got := out.String()
	prefix, suffix := "flashsale: stopped serving "+url+" (strategy lock) after ", ": 2 requests answered (1 2xx, 1 4xx, 0 5xx)\n"
	if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) || strings.Count(got, "\n") != 1 {
		t.Errorf("serve printed after its URL:\n%q\nwant one line %q…%q", got, prefix, suffix)
	}
}

// TestClientDisconnectIsNoServerError: a buyer who gives up while the
// order is in its race window is logged at DEBUG, not as a failed request.
func TestClientDisconnectIsNoServerError(t *testing.T) {
	var logs testenv.Buffer
	url, stop := runServe(t, &logs, &bytes.Buffer{}, "--jwt-secret", serveSecret, "--admin-token", serveAdmin,
		"--strategy", "conditional", "--race-window", "5s", "--log-level", "debug")
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(1), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/api/vouchers/"+v.ID+"/orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+userToken(t, 3))
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the order was answered (%s) inside its 5s race window", res.Status)
	}
	const abandoned = `level=DEBUG msg="request abandoned by its client" method=POST path=/api/vouchers/`
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), abandoned); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log lacks %q:\n%s", abandoned, logs.String())
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if log := logs.String(); strings.Contains(log, "level=ERROR") {
		t.Errorf("a client that gave up was logged as an error:\n%s", log)
	}
}
