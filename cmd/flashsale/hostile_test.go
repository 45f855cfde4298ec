package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/metrics"
)

// TestInstanceProcessesHoldNoSecretOnTheirCommandLine: the bench's child
// instances get the JWT secret, the admin token and the backends' URLs
// (which may hold passwords) in their environment; their command lines,
// which ps and /debug/pprof/cmdline show, hold none of them.
func TestInstanceProcessesHoldNoSecretOnTheirCommandLine(t *testing.T) {
	fl := &fleets{secret: "jwt-secret-jwt-secret-jwt-secret-x", admin: "admin-token-admin-token-admin-token",
		b: &backends{redisURL: "redis://:redispass@127.0.0.1:6379/0", dbURL: "mysql://root:dbpass@127.0.0.1:3306/x", prefix: "lab:"}}
	args, env := fl.processArgs("async")
	line := strings.Join(args, " ")
	for _, secret := range []string{fl.secret, fl.admin, "redispass", "dbpass"} {
		if strings.Contains(line, secret) {
			t.Fatalf("the command line %q holds a secret %q", line, secret)
		}
		if !strings.Contains(strings.Join(env, "\n"), secret) {
			t.Fatalf("the environment lacks %q", secret)
		}
	}
}

// TestServeSurfaces: by default the public listener serves no /metrics,
// and --metrics-addr no pprof (issue 33: /debug/pprof/cmdline handed out
// the admin token); --pprof and --public-metrics turn them on. The admin
// token comes from a file, and a file others may read is warned about.
func TestServeSurfaces(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(serveAdmin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	url, stop := runServe(t, &logs, io.Discard, "--jwt-secret", serveSecret, "--admin-token-file", tokenFile, "--metrics-addr", "127.0.0.1:0")
	metricsAddr := metricsAddrIn(t, logs.String())
	for _, tt := range []struct {
		url  string
		want int
	}{
		{url + "/metrics", http.StatusNotFound},
		{url + "/debug/pprof/cmdline", http.StatusNotFound},
		{"http://" + metricsAddr + "/debug/pprof/cmdline", http.StatusNotFound},
		{"http://" + metricsAddr + "/metrics", http.StatusOK},
	} {
		if code := call(t, "GET", tt.url, "", "", nil); code != tt.want {
			t.Errorf("GET %s: %d, want %d", tt.url, code, tt.want)
		}
	}
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(1), nil); code != http.StatusCreated {
		t.Errorf("create a voucher with the admin token of the file: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "readable by others") || !strings.Contains(logs.String(), "--admin-token-file") {
		t.Errorf("no warning of the admin token file readable by others in:\n%s", logs.String())
	}

	var logs2 testenv.Buffer
	url, _ = runServe(t, &logs2, io.Discard, "--jwt-secret", serveSecret, "--metrics-addr", "127.0.0.1:0", "--pprof", "--public-metrics")
	metricsAddr = metricsAddrIn(t, logs2.String())
	for _, u := range []string{url + "/metrics", "http://" + metricsAddr + "/debug/pprof/cmdline"} {
		if code := call(t, "GET", u, "", "", nil); code != http.StatusOK {
			t.Errorf("GET %s with --pprof --public-metrics: %d, want 200", u, code)
		}
	}
	if code := call(t, "GET", url+"/debug/pprof/cmdline", "", "", nil); code != http.StatusNotFound {
		t.Errorf("pprof on the public listener: %d, want 404", code)
	}
}

// metricsAddrIn returns the address serve's log says its metrics
// listener took.
func metricsAddrIn(t *testing.T, log string) string {
	t.Helper()
	m := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", log)
	}
	return m[1]
}

// TestServeRefusesWeakAdminTokens: an admin token under 32 bytes (the
// README's old change-me) is refused at start, saying how to make one;
// so is --pprof without a listener of its own.
func TestServeRefusesWeakAdminTokens(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--admin-token", "change-me"}, "the admin token must be at least 32 bytes, got 9 (make one: umask 077"},
		{[]string{"--admin-token", serveAdmin, "--admin-token-file", "x"}, "not both"},
		{[]string{"--pprof"}, "--pprof needs --metrics-addr"},
	} {
		var stderr bytes.Buffer
		err := run(t.Context(), append([]string{"serve", "--jwt-secret", serveSecret}, tt.args...), io.Discard, &stderr)
		if err == nil || !strings.Contains(stderr.String()+err.Error(), tt.want) {
			t.Errorf("serve %v: %v %s; want %q", tt.args, err, stderr.String(), tt.want)
		}
	}
}

// TestMetricsListenerTimeouts: the --metrics-addr listener has the main
// listener's timeouts (it had only ReadHeaderTimeout: a slow client
// could hold a connection open without end).
func TestMetricsListenerTimeouts(t *testing.T) {
	srv, _, err := listenMetrics("127.0.0.1:0", metrics.New(""), false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stopMetrics(srv)
	main := newHTTPServer(nil, slog.New(slog.DiscardHandler))
	if srv.ReadTimeout != main.ReadTimeout || srv.WriteTimeout != main.WriteTimeout || srv.IdleTimeout != main.IdleTimeout ||
		srv.ReadHeaderTimeout != main.ReadHeaderTimeout || srv.MaxHeaderBytes != main.MaxHeaderBytes || srv.ReadTimeout == 0 {
		t.Fatalf("metrics listener: read %v, write %v, idle %v; want the main listener's", srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
}

// TestDashboardAdminGuessesThrottled: the dashboard's stats show the
// admin more; wrong tokens there spend the address's guesses as on the
// admin routes, and a blocked address gets the public view even with the
// right token.
func TestDashboardAdminGuessesThrottled(t *testing.T) {
	url, _ := startServe(t, "--strategy", "conditional")
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(5), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	adminView := func(token string) bool {
		var stats struct{ Voucher map[string]any }
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) { // until the sampler has it
			code := call(t, "GET", url+"/api/vouchers/"+v.ID+"/stats", token, "", &stats)
			if code == http.StatusOK {
				break
			}
			if code != http.StatusNotFound || time.Now().After(deadline) {
				t.Fatalf("stats: %d", code)
			}
		}
		_, ok := stats.Voucher["units"]
		return ok
	}
	if !adminView(serveAdmin) {
		t.Fatal("the admin token does not show the admin view")
	}
	for i := range 30 {
		if adminView(fmt.Sprintf("guess-%040d", i)) {
			t.Fatal("a wrong guess showed the admin view")
		}
	}
	if adminView(serveAdmin) {
		t.Fatal("after 30 wrong guesses in a moment the address still had its token compared")
	}
}
