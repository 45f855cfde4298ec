package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	metricsAddr := freeAddr(t)
	var logs testenv.Buffer
	url, stop := runServe(t, &logs, io.Discard, "--jwt-secret", serveSecret, "--admin-token-file", tokenFile, "--metrics-addr", metricsAddr)
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

	metricsAddr = freeAddr(t)
	url, _ = startServe(t, "--metrics-addr", metricsAddr, "--pprof", "--public-metrics")
	for _, u := range []string{url + "/metrics", "http://" + metricsAddr + "/debug/pprof/cmdline"} {
		if code := call(t, "GET", u, "", "", nil); code != http.StatusOK {
			t.Errorf("GET %s with --pprof --public-metrics: %d, want 200", u, code)
		}
	}
	if code := call(t, "GET", url+"/debug/pprof/cmdline", "", "", nil); code != http.StatusNotFound {
		t.Errorf("pprof on the public listener: %d, want 404", code)
	}
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
