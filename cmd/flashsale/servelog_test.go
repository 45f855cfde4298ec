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
	started, got, _ := strings.Cut(out.String(), "\n")
	if want := "flashsale: serving " + url + " (strategy lock); dashboard: " + url + "/dashboard"; started != want {
		t.Errorf("serve started with %q, want %q", started, want)
	}
	prefix, suffix := "flashsale: stopped serving "+url+" (strategy lock) after ", ": 2 requests answered (1 2xx, 1 4xx, 0 5xx)\n"
	if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) || strings.Count(got, "\n") != 1 {
		t.Errorf("serve printed after its URL:\n%q\nwant one line %q…%q", got, prefix, suffix)
	}
}

// TestServeWarnsOfUnsafeStrategies: the lab's strategies that break an
// invariant by design say so when serve starts, on stdout and in the log;
// the safe ones do not. GET / leads to the dashboard the first line names.
func TestServeWarnsOfUnsafeStrategies(t *testing.T) {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		strategy, warning string // "" for none
	}{
		{"naive", "strategy naive is UNSAFE BY DESIGN: it loses stock updates and oversells; it is for the load lab, never for a real sale"},
		{"mutex", "strategy mutex is UNSAFE BY DESIGN: it oversells with more than one instance (its mutex is per process); it is for the load lab, never for a real sale"},
		{"optimistic", "strategy optimistic is UNSAFE BY DESIGN: it turns buyers away while stock is left (undersells); it is for the load lab, never for a real sale"},
		{"conditional", ""},
		{"async", ""},
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
			var logs, out testenv.Buffer
			url, stop := runServe(t, &logs, &out, "--jwt-secret", serveSecret, "--admin-token", serveAdmin, "--strategy", tt.strategy)
			res, err := noRedirect.Get(url + "/")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/dashboard" {
				t.Errorf("GET / answered %s, Location %q; want 302 to /dashboard", res.Status, res.Header.Get("Location"))
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(out.String(), "\n")
			if want := "; dashboard: " + url + "/dashboard"; !strings.HasSuffix(lines[0], want) {
				t.Errorf("the first line %q does not end in %q", lines[0], want)
			}
			warned := lines[1] == "flashsale: WARNING: "+tt.warning && strings.Contains(logs.String(), `level=WARN msg="`+tt.warning+`"`)
			if tt.warning == "" {
				warned = strings.Contains(out.String()+logs.String(), "UNSAFE")
			}
			if warned != (tt.warning != "") {
				t.Errorf("want the warning %q (none if empty) on stdout and in the log; stdout:\n%s\nlog:\n%s", tt.warning, out.String(), logs.String())
			}
		})
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
