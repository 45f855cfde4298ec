package main

import (
	"context"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// benchTarget runs `flashsale bench --target url` with the rig's backends
// and secrets in this process and returns its exit status, its stdout and
// its stderr, or fails the test when it has not ended within limit of
// after being closed (the target's death).
func benchTarget(t *testing.T, r *saleRig, url string, after <-chan struct{}, limit time.Duration) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.Buffer
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"bench", "--target", url, "--strategy", "conditional",
			"--jwt-secret", faultSecret, "--admin-token", faultAdmin,
			"--redis", r.redisURL, "--redis-prefix", r.prefix, "--db", r.dbURL,
			"--stock", "100", "--users", "2000", "--requests", "1000000", "--concurrency", "20"}, &stdout, &stderr)
	}()
	<-after
	select {
	case code := <-done:
		return code, stdout.String(), stderr.String()
	case <-time.After(limit):
		cancel()
		<-done
		t.Fatalf("bench went on %s after its target died:\nstdout:\n%s\nstderr:\n%s", limit, stdout.String(), stderr.String())
		return 0, "", ""
	}
}

// checkStopped checks that bench said the target was unreachable, showed
// no table, and kept the log it names.
func checkStopped(t *testing.T, code int, stdout, stderr, url string) {
	t.Helper()
	t.Logf("stderr:\n%s", stderr)
	if want := "lab: target unreachable: "; code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, url) {
		t.Errorf("exit %d, want 1 and %q naming %s; stderr:\n%s", code, want, url, stderr)
	}
	if strings.Contains(stdout, "oversold") || strings.Contains(stderr, "ceiling 1/3") {
		t.Errorf("bench went on to the table or the calibration:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	m := regexp.MustCompile(`logs kept in (\S+): (.*)\n`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr names no log folder:\n%s", stderr)
	}
	entries, err := os.ReadDir(m[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(m[1]) })
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if named := strings.Split(m[2], ", "); !slices.Equal(names, named) || !slices.Contains(names, "bench.log") {
		t.Errorf("the log folder holds %v; stderr names %v", names, named)
	}
	if log, err := os.ReadFile(m[1] + "/bench.log"); err != nil || !strings.Contains(string(log), "target unreachable") {
		t.Errorf("bench.log does not say why the run stopped (%v):\n%s", err, log)
	}
}

// TestBenchStopsOnADeadTarget: bench --target stops, says the target is
// unreachable and exits non-zero, instead of sending its plan and the
// calibration to a closed port: for a server that was never there, and
// for one killed mid-sale.
func TestBenchStopsOnADeadTarget(t *testing.T) {
	r := newSaleRig(t, testenv.MySQLURL(t))
	t.Run("never there", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + ln.Addr().String()
		ln.Close()
		now := make(chan struct{})
		close(now)
		code, stdout, stderr := benchTarget(t, r, url, now, 10*time.Second)
		checkStopped(t, code, stdout, stderr, url)
	})
	t.Run("killed mid-sale", func(t *testing.T) {
		p, err := lab.StartProcess(context.Background(), r.command("serve", "--addr", "127.0.0.1:0", "--strategy", "conditional"), r.logPath("serve"), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		killed := make(chan struct{})
		var code int
		var stdout, stderr string
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			code, stdout, stderr = benchTarget(t, r, p.URL, killed, 10*time.Second)
		}()
		db, err := store.Open(context.Background(), r.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		deadline := time.Now().Add(time.Minute)
		for !saleUnderWay(t, db) {
			if time.Now().After(deadline) {
				t.Fatal("no order reached MySQL within a minute")
			}
			time.Sleep(100 * time.Millisecond)
		}
		p.Kill()
		close(killed)
		<-finished
		checkStopped(t, code, stdout, stderr, p.URL)
	})
}

// saleUnderWay reports whether an order of the rig's sale reached MySQL.
func saleUnderWay(t *testing.T, db *store.DB) bool {
	id, err := db.MaxOrderID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id > 0
}
