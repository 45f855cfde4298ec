package consume_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
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
	"github.com/flashsale/flashsale/store"
)

// The multi-process tests re-run this test binary as a consumer process,
// configured through these environment variables, so it can be killed.
const (
	helperEnv        = "ASYNC_TEST_CONSUMER" // "1" runs a consumer instead of the tests
	helperPrefix     = "ASYNC_TEST_PREFIX"
	helperURL        = "ASYNC_TEST_DB"
	helperName       = "ASYNC_TEST_NAME"
	helperBatch      = "ASYNC_TEST_BATCH"
	helperDeliveries = "ASYNC_TEST_MAX_DELIVERIES"
	// helperClaimIdle and helperHeartbeat are ClaimIdle (default 1s) and
	// Heartbeat (default consume's), as time.ParseDuration reads them.
	helperClaimIdle = "ASYNC_TEST_CLAIM_IDLE"
	helperHeartbeat = "ASYNC_TEST_HEARTBEAT"
	// helperHangAfter: once this many orders are inserted, the process
	// persists one more batch, sets the key <prefix>hung, and hangs
	// before acknowledging it.
	helperHangAfter = "ASYNC_TEST_HANG_AFTER"
	// helperPoison: the process kills itself (SIGKILL) when a batch holds
	// this order id, like a consumer crashing on a poisonous order.
	helperPoison = "ASYNC_TEST_POISON"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		runConsumerProcess()
		return
	}
	os.Exit(testenv.RunMain(m))
}

// runConsumerProcess runs a consume.Consumer until SIGTERM or SIGKILL. Setup
// errors panic: the process exits and the test waiting for it fails.
func runConsumerProcess() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	client, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		panic(err)
	}
	defer client.Close()
	db, err := store.Open(ctx, os.Getenv(helperURL))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	atoi := func(name string) int64 {
		n, _ := strconv.ParseInt(os.Getenv(name), 10, 64)
		return n
	}
	duration := func(name string, def time.Duration) time.Duration {
		d, err := time.ParseDuration(os.Getenv(name))
		if err != nil {
			return def
		}
		return d
	}
	p := &helperPersister{db: db, client: client, prefix: os.Getenv(helperPrefix),
		hangAfter: atoi(helperHangAfter), poison: atoi(helperPoison)}
	c := consume.New(client, p, consume.Config{
		Prefix:        os.Getenv(helperPrefix),
		Name:          os.Getenv(helperName),
		BatchSize:     int(atoi(helperBatch)),
		MaxDeliveries: atoi(helperDeliveries),
		Block:         100 * time.Millisecond,
		ClaimIdle:     duration(helperClaimIdle, time.Second),
		Heartbeat:     duration(helperHeartbeat, 0),
		Refresh:       100 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err := c.Run(ctx); err != nil {
		panic(err)
	}
}

// helperPersister is a store that crashes or hangs on cue.
type helperPersister struct {
	db        *store.DB
	client    rueidis.Client
	prefix    string
	hangAfter int64
	poison    int64
	inserted  atomic.Int64
}

// PersistOrders implements consume.Persister.
func (p *helperPersister) PersistOrders(ctx context.Context, orders []flashsale.Order) (flashsale.PersistResult, error) {
	if p.poison != 0 && slices.ContainsFunc(orders, func(o flashsale.Order) bool { return o.ID == p.poison }) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	res, err := p.db.PersistOrders(ctx, orders)
	if err == nil && p.hangAfter > 0 && p.inserted.Add(int64(res.Inserted)) > p.hangAfter {
		if err := p.client.Do(ctx, p.client.B().Set().Key(p.prefix+"hung").Value("1").Build()).Error(); err != nil {
			panic(err)
		}
		select {} // never acknowledge: wait for SIGKILL
	}
	return res, err
}

// consumerProcess is a running consumer process.
type consumerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startConsumer starts a consumer process on the env with extra settings
// ("NAME=value"). Its log goes to a file printed if the test fails; it is
// killed when the test ends.
func startConsumer(t *testing.T, e *env, name string, settings ...string) *consumerProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperPrefix+"="+e.Prefix, helperURL+"="+e.URL, helperName+"="+name)
	cmd.Env = append(cmd.Env, settings...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &consumerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read through ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("log of consumer process %s:\n%s", name, out)
		}
	})
	return p
}

// kill kills the process with SIGKILL and waits for it.
func (p *consumerProcess) kill() {
	_ = p.cmd.Process.Kill() // it may be gone already
	<-p.exited
}

// pendingOf returns the entries of the voucher's stream pending on a
// consumer.
func (e *env) pendingOf(voucherID int64, consumer string) int {
	e.T.Helper()
	key := e.Keys.Voucher(voucherID).Orders
	p, err := e.Do(e.Client.B().Xpending().Key(key).Group(async.DefaultGroup).Start("-").End("+").Count(10000).Consumer(consumer).Build()).ToArray()
	if err != nil {
		e.T.Fatal(err)
	}
	return len(p)
}

// TestConsumerProcessKilledMidDrainIsTakenOver: a consumer process is
// SIGKILLed holding a persisted, unacknowledged batch; a new consumer
// (another name, as a restart with the default name) takes it over, each
// way on its own: after ClaimIdle (the heartbeat outlives the test), or
// by the dead consumer's heartbeat (ClaimIdle outlives the test). Each
// order is in MySQL once.
func TestConsumerProcessKilledMidDrainIsTakenOver(t *testing.T) {
	for _, by := range []struct {
		name     string
		settings []string
	}{
		{"after ClaimIdle", []string{helperClaimIdle + "=1s", helperHeartbeat + "=1h"}},
		{"by its heartbeat", []string{helperClaimIdle + "=1h", helperHeartbeat + "=2s"}},
	} {
		t.Run(by.name, func(t *testing.T) {
			e := newEnv(t)
			v := e.Voucher(500)
			accepted := e.Sell(v.ID, 2000, 3)
			if len(accepted) != 500 {
				t.Fatalf("%d orders accepted, want 500", len(accepted))
			}
			first := startConsumer(t, e, "first", append(by.settings, helperBatch+"=20", helperHangAfter+"=100")...)
			e.WaitFor("the first consumer to hang mid-drain", 60*time.Second, func() (bool, error) {
				err := e.Client.Do(context.Background(), e.Client.B().Get().Key(e.Prefix+"hung").Build()).Error()
				return err == nil, nil
			})
			first.kill()
			killed := time.Now()
			held := e.pendingOf(v.ID, "first")
			if held == 0 {
				t.Fatal("the killed consumer holds no entries; the test kills too late")
			}
			startConsumer(t, e, "second", append(by.settings, helperBatch+"=50")...)
			e.WaitDrained(v.ID, 500)
			t.Logf("killed the first consumer holding %d persisted, unacknowledged entries; all 500 orders in MySQL %v later",
				held, time.Since(killed).Round(100*time.Millisecond))
			e.CheckSold(v, accepted)
			if n := e.pendingOf(v.ID, "first"); n != 0 {
				t.Errorf("%d entries still pending on the killed consumer; want all taken over", n)
			}
			if dead := e.DeadLetters(v.ID); len(dead) != 0 {
				t.Errorf("dead letters %v; want none", dead)
			}
		})
	}
}

func TestPoisonOrderIsDeadLetteredAfterCrashes(t *testing.T) {
	// With batches of 20 the poison crashes its consumer together with 19
	// good orders; only the poison may be dead-lettered. A restarted
	// consumer comes back under a new name (it takes the dead one's entries
	// over once they are idle) or under the dead one's (it reads them again
	// as its own at once); the count of deliveries isolates the poison
	// either way.
	names := []struct {
		name string
		of   func(run int) string
	}{
		{"new name per run", func(run int) string { return fmt.Sprintf("run%d", run) }},
		{"one name for all runs", func(int) string { return "consumer" }},
	}
	for _, batch := range []int{1, 20} {
		for _, naming := range names {
			t.Run(fmt.Sprintf("batch %d, %s", batch, naming.name), func(t *testing.T) {
				const maxDeliveries = 2
				e := newEnv(t)
				v := e.Voucher(20)
				accepted := e.Buy(v.ID, asynctest.Users(1, 20)...)
				poison := accepted[9]
				settings := []string{fmt.Sprintf("%s=%d", helperBatch, batch), helperPoison + "=" + itoa(poison.ID), fmt.Sprintf("%s=%d", helperDeliveries, maxDeliveries)}

				crashes := 0
				for run := 1; ; run++ {
					if run > 2*maxDeliveries+2 {
						t.Fatalf("the poison order was not dead-lettered after %d crashes", crashes)
					}
					p := startConsumer(t, e, naming.of(run), settings...)
					crashed := false
					e.WaitFor("a crash or the end of the drain", 60*time.Second, func() (bool, error) {
						select {
						case <-p.exited:
							crashed = true
							return true, nil
						default:
						}
						a, err := e.DB.AuditVoucher(context.Background(), v.ID)
						return a.Orders == 19 && len(e.DeadLetters(v.ID)) == 1, err
					})
					if !crashed {
						break
					}
					crashes++
				}
				// One crash per delivery in a batch, then one per attempt on its own.
				if crashes != 2*maxDeliveries {
					t.Errorf("%d crashes, want %d", crashes, 2*maxDeliveries)
				}
				dead := e.DeadLetters(v.ID)
				want := fmt.Sprintf("delivered %d times; %d attempts to persist it on its own did not finish", 2*maxDeliveries+1, maxDeliveries)
				if len(dead) != 1 || dead[0].FieldValues[layout.FieldOrder] != itoa(poison.ID) || dead[0].FieldValues[layout.FieldReason] != want {
					t.Fatalf("dead letters = %v; want only order %d: %s", dead, poison.ID, want)
				}
				e.WaitDrained(v.ID, 19)
				if _, err := e.DB.FindOrder(context.Background(), poison.ID); asynctest.Code(err) != flashsale.ENotFound {
					t.Errorf("the poison order is in MySQL: %v", err)
				}
			})
		}
	}
}
