package async_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// withDurability replaces the env's Service by one with the durability d.
func (e *env) withDurability(d async.DurabilityConfig) {
	e.T.Helper()
	svc, err := async.NewService(e.Client, e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log, Durability: d})
	if err != nil {
		e.T.Fatal(err)
	}
	e.Svc = svc
}

// replicated starts a primary and a replica of it and returns them, with
// an env on the primary.
func replicated(t *testing.T) (e *env, primary, replica *testenv.RedisServer) {
	t.Helper()
	primary = testenv.StartRedis(t)
	replica = testenv.StartRedis(t, testenv.WithConfig("replicaof", strings.Replace(primary.Addr(), ":", " ", 1)))
	dsn, url := asynctest.MySQLDatabase(t)
	e = newEnvOn(t, primary.Client(t), testenv.Unique()+":", dsn, url)
	e.WaitFor("the replica to connect", 30*time.Second, func() (bool, error) {
		f, err := serverInfo(replica.Client(t), "replication")
		return f["master_link_status"] == "up", err
	})
	return e, primary, replica
}

// serverInfo returns the fields of an INFO section.
func serverInfo(c rueidis.Client, section string) (map[string]string, error) {
	text, err := c.Do(context.Background(), c.B().Info().Section(section).Build()).ToString()
	return async.InfoFields(text), err
}

// serverPID returns a Redis server's process id, to signal it (SIGSTOP:
// a replica that stops reading the replication stream).
func serverPID(t *testing.T, s *testenv.RedisServer) int {
	t.Helper()
	f, err := serverInfo(s.Client(t), "server")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(f["process_id"])
	if err != nil {
		t.Fatalf("process_id %q: %v", f["process_id"], err)
	}
	return pid
}

// TestCheckDurability checks that the start-up check refuses settings that
// cannot keep the mode's promise, naming the setting, and takes the
// operator's word only where the settings cannot be read.
func TestCheckDurability(t *testing.T) {
	noConfig := testenv.WithConfig("rename-command", `CONFIG ""`)
	replica := testenv.StartRedis(t, testenv.WithConfig("replicaof", "127.0.0.1 1")) // a replica of nothing
	tests := []struct {
		name    string
		server  *testenv.RedisServer
		cfg     async.DurabilityConfig
		wantErr string // "" for no error
	}{
		{"memory on anything", testenv.StartRedis(t), async.DurabilityConfig{}, ""},
		{"aof without AOF", testenv.StartRedis(t), async.DurabilityConfig{Mode: async.DurabilityAOF}, "appendonly yes, Redis has appendonly no"},
		{"aof everysec", testenv.StartRedis(t, testenv.WithConfig("appendonly", "yes")), async.DurabilityConfig{Mode: async.DurabilityAOF}, "appendfsync always, Redis has appendfsync everysec"},
		{"aof always", testenv.StartRedis(t, testenv.WithAOF()), async.DurabilityConfig{Mode: async.DurabilityAOF}, ""},
		{"aof, CONFIG disabled", testenv.StartRedis(t, testenv.WithAOF(), noConfig), async.DurabilityConfig{Mode: async.DurabilityAOF}, "needs appendonly yes, and it cannot be read"},
		{"aof, CONFIG disabled, trusted", testenv.StartRedis(t, noConfig), async.DurabilityConfig{Mode: async.DurabilityAOF, Trusted: true}, ""},
		{"aof everysec, trusted", testenv.StartRedis(t, testenv.WithConfig("appendonly", "yes")), async.DurabilityConfig{Mode: async.DurabilityAOF, Trusted: true}, "Redis has appendfsync everysec"},
		{"replica on a primary without replicas", testenv.StartRedis(t), async.DurabilityConfig{Mode: async.DurabilityReplica}, ""},
		{"replica on a replica", replica, async.DurabilityConfig{Mode: async.DurabilityReplica}, `role is "slave"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := async.CheckDurability(context.Background(), tt.server.Client(t), tt.cfg, asynctest.Logger(t))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckDurability: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, async.ErrDurability)):
				t.Fatalf("CheckDurability = %v, want async.ErrDurability saying %q", err, tt.wantErr)
			}
		})
	}
	if _, err := async.ParseDurability("disk"); err == nil {
		t.Error(`async.ParseDurability("disk") did not fail`)
	}
}

// TestReplicaDurabilityBatchesWait sells stock 1,000 to 1,500 concurrent
// buyers (two clicks each) in durability replica: every order the gate
// accepted is on the replica the moment the buyer is told, and the WAITs
// are far fewer than the orders.
func TestReplicaDurabilityBatchesWait(t *testing.T) {
	const stock, buyers = 1000, 1500
	e, primary, replica := replicated(t)
	e.withDurability(async.DurabilityConfig{Mode: async.DurabilityReplica, ReplicaTimeout: 5 * time.Second})
	v := e.Voucher(stock)
	rc := replica.Client(t)
	buyersKey := e.Keys.Voucher(v.ID).Buyers
	ctx := context.Background()

	var mu sync.Mutex
	var accepted []*flashsale.Order
	codes := map[string]int{}
	var wg sync.WaitGroup
	for u := int64(1); u <= buyers; u++ {
		wg.Go(func() {
			for range 2 {
				o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
				if err == nil {
					// Told: the replica must have it now.
					got, rerr := rc.Do(ctx, rc.B().Hget().Key(buyersKey).Field(strconv.FormatInt(u, 10)).Build()).ToString()
					if _, latest := layout.ParseBuyer(got); rerr != nil || latest != strconv.FormatInt(o.ID, 10) {
						t.Errorf("order %d of user %d accepted, the replica has %q (%v)", o.ID, u, got, rerr)
					}
				}
				mu.Lock()
				if err == nil {
					accepted = append(accepted, o)
				}
				codes[asynctest.Code(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(accepted) != stock || codes[flashsale.EUnavailable] != 0 {
		t.Fatalf("accepted %d, answers %v; want %d accepted and no unavailable", len(accepted), codes, stock)
	}
	f, err := serverInfo(primary.Client(t), "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	waits := statCalls(f["cmdstat_wait"])
	t.Logf("answers %v; %d WAITs for %d order attempts", codes, waits, 2*buyers)
	if waits == 0 || waits > 2*buyers/4 {
		t.Errorf("%d WAITs for %d order attempts: want some, and at most a quarter", waits, 2*buyers)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, stock)
	e.CheckSold(v, accepted)
}

// statCalls reads calls=N from an INFO commandstats value.
func statCalls(s string) int {
	for f := range strings.SplitSeq(s, ",") {
		if n, ok := strings.CutPrefix(f, "calls="); ok {
			c, _ := strconv.Atoi(n)
			return c
		}
	}
	return 0
}

// TestReplicaDurabilityWithholdsUnreplicatedOrders stops the replica
// (SIGSTOP): an order is then neither accepted nor refused (unavailable,
// with a Retry-After), and neither a duplicate_order refusal nor a lookup
// reveals an order the replica does not have — also one written by an
// instance that does not wait for replicas. Once the replica runs again,
// the retry names the order the first attempt took: never two.
func TestReplicaDurabilityWithholdsUnreplicatedOrders(t *testing.T) {
	e, _, replica := replicated(t)
	ctx := context.Background()
	fast := e.Svc // durability memory: writes without waiting
	e.withDurability(async.DurabilityConfig{Mode: async.DurabilityReplica, ReplicaTimeout: 300 * time.Millisecond})
	v := e.Voucher(10)
	// Replicated: the connections the gate waits on have nothing left to
	// wait for, unless a refusal writes.
	e.Buy(v.ID, 1)

	pid := serverPID(t, replica)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	other, err := fast.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 3}) // another instance, no WAIT
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 3}); asynctest.Code(err) != flashsale.EUnavailable {
		t.Fatalf("duplicate of an unreplicated order: %v; want unavailable", err)

	}
	if _, err := e.Svc.FindOrder(ctx, other.ID); asynctest.Code(err) != flashsale.EUnavailable {
		t.Fatalf("lookup of an unreplicated order: %v; want unavailable", err)
	}
	_, err = e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2})
	if asynctest.Code(err) != flashsale.EUnavailable || flashsale.RetryAfter(err) <= 0 {
		t.Fatalf("order while the replica is stopped: %v; want unavailable with a Retry-After", err)
	}
	_, err = e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2})
	if asynctest.Code(err) != flashsale.EUnavailable {
		t.Fatalf("retry while the replica is stopped: %v; want unavailable, not the unreplicated order", err)
	}

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var first string
	e.WaitFor("the retry to be answered", 30*time.Second, func() (bool, error) {
		_, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2})
		if asynctest.Code(err) == flashsale.EUnavailable {
			return false, nil
		}
		if asynctest.Code(err) != flashsale.EDuplicateOrder {
			return false, err
		}
		first = flashsale.ErrorMessage(err)
		return true, nil
	})
	stock, _, buyers := e.Snapshot(v.ID)
	if buyers != 3 || stock != 7 {
		t.Fatalf("Redis: stock %d, buyers %d; want 7 and 3 (users 1-3, one order each)", stock, buyers)
	}
	record, err := e.Client.Do(ctx, e.Client.B().Hget().Key(e.Keys.Voucher(v.ID).Buyers).Field("2").Build()).ToString()
	_, held := layout.ParseBuyer(record)
	if err != nil || !strings.Contains(first, held) {
		t.Errorf("the retry said %q; user 2 holds order %s (%v)", first, held, err)
	}
	if o, err := e.Svc.FindOrder(ctx, other.ID); err != nil || o.Status != flashsale.StatusPending {
		t.Errorf("lookup once replicated: %+v, %v; want pending", o, err)
	}
}

// TestCheckDurabilityPartitions: durability replica logs loudly at start
// when a network partition can lose accepted orders (--min-replicas below
// the replicas, min-replicas-to-write below --min-replicas), and says it
// cannot once both hold.
func TestCheckDurabilityPartitions(t *testing.T) {
	_, primary, _ := replicated(t)
	rc := primary.Client(t)
	tests := []struct {
		min     int
		toWrite string
		want    string
	}{
		{1, "0", "min-replicas-to-write is 0, below --min-replicas 1"},
		{1, "1", "a network partition loses no accepted order"},
		{2, "2", "a network partition loses no accepted order"}, // and a warning: fewer connected
	}
	for _, tt := range tests {
		ctx := context.Background()
		if err := rc.Do(ctx, rc.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", tt.toWrite).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		err := async.CheckDurability(ctx, rc, async.DurabilityConfig{Mode: async.DurabilityReplica, MinReplicas: tt.min}, slog.New(slog.NewTextHandler(&buf, nil)))
		if err != nil || !strings.Contains(buf.String(), tt.want) {
			t.Errorf("--min-replicas %d, min-replicas-to-write %s: %v; want a log saying %q:\n%s", tt.min, tt.toWrite, err, tt.want, buf.String())
		}
		if warned := strings.Contains(buf.String(), async.PartitionWarning); warned != strings.Contains(tt.want, "below") {
			t.Errorf("--min-replicas %d, min-replicas-to-write %s: warned %v:\n%s", tt.min, tt.toWrite, warned, buf.String())
		}
	}
}
