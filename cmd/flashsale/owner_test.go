package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// identity returns the identity of the database at url.
func identity(t *testing.T, url string) string {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id, err := db.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestTwoDeploymentsOnOneRedisPrefix is the case of two deployments on one
// Redis with the default prefix: a live one (serve --strategy async)
// sells; mid-sale the README's lab (bench, another database, the default
// prefix), a serve and a consume of that other database each refuse to
// start, naming both databases; the live sale ends exact, nothing lost or
// dead-lettered. With a prefix of its own the lab then runs, exact.
func TestTwoDeploymentsOnOneRedisPrefix(t *testing.T) {
	srv := testenv.StartRedis(t) // private: the default prefix is the test's alone
	r := newSaleRig(t, testenv.MySQLURL(t))
	r.redisURL, r.redis, r.prefix = srv.URL(), srv.Client(t), async.DefaultPrefix
	labDB := testenv.MySQLURL(t)
	liveID, labID := identity(t, r.dbURL), identity(t, labDB)

	live := r.serve(true)
	r.createVoucher(live.URL)
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, userRange(1, faultUsers), func() []string { return []string{live.URL} }, faultStock/3, func() {
		second := [][]string{
			{"bench", "--strategy", "async", "--stock", "20", "--users", "60", "--server-bin", r.bin},
			{"serve", "--strategy", "async", "--addr", "127.0.0.1:0", "--jwt-secret", faultSecret},
			{"consume"},
		}
		for _, args := range second {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, err := exec.CommandContext(ctx, r.bin, append(args, "--redis", srv.URL(), "--db", labDB)...).CombinedOutput()
			cancel()
			msg := string(out)
			if err == nil || !strings.Contains(msg, `the Redis prefix "flashsale:" belongs to database `+liveID) ||
				!strings.Contains(msg, "this process's is database "+labID) || !strings.Contains(msg, "--redis-prefix "+suggestPrefix(labDB, async.DefaultPrefix)) {
				t.Errorf("%s on another database and the same prefix: %v\n%s\nwant it refused, naming both databases and another prefix", args[0], err, msg)
			}
		}
	})
	if s.failures != 0 || len(s.accepted) != faultStock {
		t.Fatalf("%d accepted, %d transport errors; want %d and none", len(s.accepted), s.failures, faultStock)
	}
	r.check(s)

	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "--strategy", "async", "--stock", "20", "--users", "60", "--concurrency", "20",
		"--redis", srv.URL(), "--redis-prefix", "lab:", "--db", labDB, "--server-bin", r.bin}, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), "exact: async") {
		t.Errorf("the lab on a prefix of its own: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
}

// TestBenchNoticesAConsumerItDidNotStart: a consumer of another database
// (a library consumer: a process would refuse the prefix) reads the lab's
// prefix; the lab stops with ErrForeignConsumer naming it, and the
// intruder dead-letters nothing.
func TestBenchNoticesAConsumerItDidNotStart(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	other, err := store.Open(context.Background(), testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	intruder := consume.New(rc, other, consume.Config{Prefix: prefix, Name: "intruder", ClaimIdle: time.Hour,
		Refresh: 20 * time.Millisecond, Block: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- intruder.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"bench", "--strategy", "async", "--instances", "1", "--stock", "50", "--users", "300",
		"--concurrency", "20", "--drain-timeout", "20s", "--redis", "redis://" + testenv.RedisAddr() + "/0", "--redis-prefix", prefix,
		"--db", "sqlite://" + filepath.Join(t.TempDir(), "lab.db")}, &stdout, &stderr)
	if !errors.Is(err, lab.ErrForeignConsumer) || !strings.Contains(err.Error(), "intruder") || !strings.Contains(err.Error(), "bench-") {
		t.Errorf("bench with a consumer it did not start: %v\n%s\n%s; want it named, with the lab's own", err, stdout.String(), stderr.String())
	}
	if s := intruder.Stats(); s.DeadLettered != 0 {
		t.Errorf("the intruder: %+v; want nothing dead-lettered", s)
	}
}

// TestRunningServeWatchesThePrefixClaim: a running serve claims its prefix
// again when the claim vanished (Redis lost its data), and logs loudly when
// it finds another database's claim.
func TestRunningServeWatchesThePrefixClaim(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	dbURL := testenv.MySQLURL(t)
	var stderr testenv.Buffer
	runServe(t, &stderr, io.Discard, "--jwt-secret", serveSecret, "--strategy", "conditional",
		"--redis", "redis://"+testenv.RedisAddr()+"/0", "--redis-prefix", prefix, "--db", dbURL)
	id := identity(t, dbURL)
	key := prefix + "owner"
	claim := func() async.Owner {
		var o async.Owner
		raw, err := rc.Do(context.Background(), rc.B().Get().Key(key).Build()).ToString()
		if err == nil {
			_ = json.Unmarshal([]byte(raw), &o)
		}
		return o
	}
	if o := claim(); o.ID != id {
		t.Fatalf("claim %+v; want database %s's", o, id)
	}
	if err := rc.Do(context.Background(), rc.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the claim made again", func() bool { return claim().ID == id })
	// The serve says so once the claim is written: wait for the line too.
	waitFor(t, "the claim made again said in the log", func() bool { return strings.Contains(stderr.String(), "claimed it again") })
	other := `{"id":"another","database":"mysql://elsewhere/db"}`
	if err := rc.Do(context.Background(), rc.B().Set().Key(key).Value(other).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other claim logged", func() bool {
		return strings.Contains(stderr.String(), "ANOTHER DEPLOYMENT CLAIMED THIS REDIS PREFIX")
	})
}

// waitFor polls cond until it holds, failing the test after a minute (a
// bound on a hang, not a measurement).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: still not so after a minute", what)
		}
	}
}
