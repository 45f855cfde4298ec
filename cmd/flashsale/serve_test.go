package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/lab"
)

const (
	serveSecret = "serve-test-secret-serve-test-secret"
	serveAdmin  = "serve-admin-serve-admin-serve-admin"
)

// startServe runs `flashsale serve` with args in this process until the
// test ends and returns its URL and a function that stops it (as SIGTERM
// does) and returns run's error.
func startServe(t testing.TB, args ...string) (string, func() error) {
	t.Helper()
	return runServe(t, io.Discard, io.Discard, append([]string{"--jwt-secret", serveSecret, "--admin-token", serveAdmin}, args...)...)
}

// runServe is startServe with only args (and --addr), the log going to
// stderr and what serve prints on stdout, its first line (with the URL)
// too, to out. Without --db, the embedded SQLite file goes to a directory
// of the test's own, and stop checks that serve removed it.
func runServe(t testing.TB, stderr, out io.Writer, args ...string) (string, func() error) {
	t.Helper()
	var tmp string
	if !slices.Contains(args, "--db") {
		tmp = privateTempDir(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), pw, stderr)
		pw.CloseWithError(fmt.Errorf("serve ended: %v", err))
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("serve printed no URL: %v", err)
	}
	_, _ = io.WriteString(out, line)
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = io.Copy(out, pr) }()
	url, _, _ := strings.Cut(strings.TrimPrefix(line, lab.ServingPrefix), " ")
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		err := <-done
		<-copied
		if tmp != "" {
			noScratchLeft(t, tmp)
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return url, stop
}

// privateTempDir points TMPDIR at a directory of the test's own, so what
// a command makes there (an embedded SQLite file, a bench's logs) is gone
// when the test ends, and returns it.
func privateTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

// noScratchLeft fails the test if a command left an embedded backend's
// directory (flashsale-*) in dir.
func noScratchLeft(t testing.TB, dir string) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, "flashsale-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		if !strings.HasPrefix(filepath.Base(l), "flashsale-bench-") { // a failed bench keeps its logs, and says so
			t.Errorf("left behind: %s", l)
		}
	}
}

// userToken returns a token of user id for the servers these tests start.
func userToken(t testing.TB, id int64) string {
	t.Helper()
	a, err := auth.New(serveSecret, serveAdmin)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.UserToken(id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// call sends a request and decodes the JSON answer into out.
func call(t testing.TB, method, url, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
	return res.StatusCode
}

func voucherBody(stock int) string {
	return fmt.Sprintf(`{"title":"t","stock":%d,"begin_time":%q,"end_time":%q}`, stock,
		time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

// TestServeOnEmbeddedBackends runs every strategy with no --redis and no
// --db: a voucher, an order, its lookup (async: pending, then created once
// its consumer persisted it), readiness, and a clean shutdown.
func TestServeOnEmbeddedBackends(t *testing.T) {
	tok := userToken(t, 7)
	for _, name := range strategies() {
		t.Run(name, func(t *testing.T) {
			url, stop := startServe(t, "--strategy", name)
			var v struct{ ID string }
			if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(3), &v); code != http.StatusCreated {
				t.Fatalf("create voucher: %d", code)
			}
			var o struct {
				OrderID string `json:"order_id"`
				Status  string
			}
			if code := call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", tok, "", &o); code != http.StatusOK || o.OrderID == "" {
				t.Fatalf("order: %d %+v", code, o)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				var got struct{ Status string }
				if code := call(t, "GET", url+"/api/orders/"+o.OrderID, tok, "", &got); code != http.StatusOK {
					t.Fatalf("get order: %d", code)
				}
				if got.Status == "created" {
					break
				}
				if got.Status != "pending" || time.Now().After(deadline) {
					t.Fatalf("order status %q; want created (after pending, for async)", got.Status)
				}
				time.Sleep(50 * time.Millisecond)
			}
			var ready map[string]any
			if code := call(t, "GET", url+"/readyz", "", "", &ready); code != http.StatusOK {
				t.Fatalf("readyz: %d %v", code, ready)
			}
			if err := stop(); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
		})
	}
}

// TestServeFinishesInFlightRequestsOnShutdown stops the server while an
// order is inside its race window: the order still completes.
func TestServeFinishesInFlightRequestsOnShutdown(t *testing.T) {
	tok := userToken(t, 9)
	url, stop := startServe(t, "--strategy", "conditional", "--race-window", "700ms")
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(1), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	answered := make(chan int, 1)
	go func() {
		var o struct{ Status string }
		answered <- call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", tok, "", &o)
	}()
	time.Sleep(200 * time.Millisecond) // the order is in its race window
	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("the in-flight order got %d; want 200", code)
	}
}

// TestSecondSignalEndsADrainAtOnce: the first SIGINT starts a graceful
// shutdown that waits for an order in flight; a second one ends the
// process at once instead of after the drain, its embedded SQLite file
// removed all the same.
func TestSecondSignalEndsADrainAtOnce(t *testing.T) {
	bin := buildFlashsale(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--jwt-secret", serveSecret, "--admin-token", serveAdmin,
		"--strategy", "conditional", "--race-window", "20s")
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp) // the embedded SQLite file goes there
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan struct{})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed no URL: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait(); close(exited) }()
	url, _, _ := strings.Cut(strings.TrimPrefix(line, lab.ServingPrefix), " ")
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(1), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	tok := userToken(t, 9)
	go func() { // in its 20s race window until the process ends
		req, _ := http.NewRequest("POST", url+"/api/vouchers/"+v.ID+"/orders", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond)

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatal("the first SIGINT ended the process without waiting for the order in flight")
	case <-time.After(500 * time.Millisecond):
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		t.Fatal("the second SIGINT did not end the process")
	}
	if cmd.ProcessState.Success() {
		t.Errorf("the second SIGINT ended serve with %v; want it killed by the signal", cmd.ProcessState)
	}
	noScratchLeft(t, tmp) // no deferred Close ran, yet the SQLite file went
}
