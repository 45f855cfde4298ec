package async_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/reconcile"
	"github.com/flashsale/flashsale/lifecycle"
)

// The model test (issue 32): random sequences of operations against the
// real gate, consumer, expirer, returns and reconciler on real Redis and
// MariaDB, with the invariants checked after every step. A failure prints
// its seed; -model.seed (or FLASHSALE_MODEL_SEED) replays that sequence
// alone. docs/testing.md says how to run more.
var (
	modelSeed = flag.Int64("model.seed", 0, "TestModel: replay only the sequence of this seed")
	modelRuns = flag.Int("model.runs", 40, "TestModel: how many sequences to run")
)

// modelWorkers run sequences at once, each on a prefix and a database of
// its own, a fresh voucher per sequence.
const modelWorkers = 3

func TestModel(t *testing.T) {
	seed := *modelSeed
	if s := os.Getenv("FLASHSALE_MODEL_SEED"); s != "" && seed == 0 {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	if seed != 0 {
		newModelWorld(t).run(seed)
		return
	}
	base := time.Now().UnixNano()
	for w := range modelWorkers {
		t.Run("worker"+strconv.Itoa(w), func(t *testing.T) {
			t.Parallel()
			m := newModelWorld(t)
			for i := w; i < *modelRuns && !t.Failed(); i += modelWorkers {
				m.run(base + int64(i))
			}
		})
	}
}

// modelWorld is one worker's pipeline: two gates (instances), an expirer
// whose clock the test moves, the returns, a reconciler; the consumer
// runs only in the steps that consume.
type modelWorld struct {
	*env
	other *async.Service
	life  *lifecycle.Service
	clock time.Duration // added to the expirer's clock
	rec   *reconcile.Reconciler
	ret   lifecycle.Restocker
}

func newModelWorld(t *testing.T) *modelWorld {
	e := newEnv(t)
	m := &modelWorld{env: e, rec: e.Reconciler(), ret: async.Returns(e.Client, e.Config())}
	var err error
	if m.other, err = async.NewService(e.Client, e.DB, e.Config()); err != nil {
		t.Fatal(err)
	}
	m.life = lifecycle.New(e.DB, lifecycle.Config{Restocker: m.ret, Logger: e.Log,
		Now: func() time.Time { return time.Now().Add(m.clock) }})
	return m
}

// modelRun is one sequence: its voucher and what the model knows.
type modelRun struct {
	*modelWorld
	rng    *rand.Rand
	seed   int64
	v      *flashsale.Voucher
	shards []layout.VoucherKeys
	orders []*flashsale.Order          // every order the gate accepted
	keys   map[string]*flashsale.Order // "<user>:<key>" → the key's first order
	lost   bool                        // a loss of keys happened: orders in the stream may be gone
	mu     sync.Mutex                  // guards trace (racing steps log at once)
	trace  []string
}

// run runs the sequence of seed.
func (m *modelWorld) run(seed int64) {
	r := &modelRun{modelWorld: m, rng: rand.New(rand.NewPCG(uint64(seed), 0)), seed: seed, keys: map[string]*flashsale.Order{}}
	r.clock = 0
	k := 1 + r.rng.IntN(3)
	r.v = &flashsale.Voucher{Title: "model", Stock: 3 + r.rng.IntN(6), LimitPerBuyer: 1 + r.rng.IntN(3), Shards: k, PayValue: 100,
		PaymentWindowSeconds: 600, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := m.Svc.CreateVoucher(context.Background(), r.v); err != nil {
		m.T.Fatalf("seed %d: create voucher: %v", seed, err)
	}
	r.shards = m.Keys.Shards(r.v.ID, k)
	r.log("voucher: stock %d, limit %d, shards %d", r.v.Stock, r.v.BuyerLimit(), k)
	for step := range 14 {
		r.step()
		if !r.check(fmt.Sprintf("step %d", step)) {
			return
		}
	}
	r.settle()
}

// fail reports a broken invariant with the seed and the steps that led to it.
func (r *modelRun) fail(format string, args ...any) bool {
	r.T.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.T.Errorf("model seed %d (replay: go test -run 'TestModel$' ./async/ -model.seed=%d): %s\nsteps:\n  %s",
		r.seed, r.seed, fmt.Sprintf(format, args...), strings.Join(r.trace, "\n  "))
	return false
}

func (r *modelRun) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
}

// step runs one random operation.
func (r *modelRun) step() {
	ctx := context.Background()
	switch n := r.rng.IntN(100); {
	case n < 35:
		r.order()
	case n < 42:
		r.withOrder(func(o *flashsale.Order) {
			_, err := r.Svc.PayOrder(ctx, flashsale.Payment{ID: "p" + strconv.FormatInt(o.ID, 10), OrderID: o.ID, Amount: 100 * int64(o.Units())})
			r.log("pay %d: %v", o.ID, code(err))
		})
	case n < 50:
		r.withOrder(func(o *flashsale.Order) {
			_, err := r.Svc.CancelOrder(ctx, o.ID, o.UserID)
			r.log("cancel %d: %v", o.ID, code(err))
		})
	case n < 55:
		r.withOrder(func(o *flashsale.Order) { // the return's second half is cut off
			_, changed, err := r.DB.CancelOrder(ctx, o.ID, o.UserID, time.Now())
			r.log("cancel %d, return cut: %v %v", o.ID, changed, code(err))
		})
	case n < 60:
		r.clock += 11 * time.Minute
		err := r.life.ExpireDue(ctx, lifecycle.ExpirerConfig{})
		r.log("expire all due: %v", err)
	case n < 66:
		err := r.life.SweepReturns(ctx, lifecycle.ExpirerConfig{SweepAfter: time.Nanosecond})
		r.log("sweep returns: %v", err)
	case n < 76:
		r.consume()
	case n < 80:
		r.move()
	case n < 85:
		r.lose(r.rng.IntN(len(r.shards)), r.rng.IntN(2) == 0)
	case n < 88:
		r.reload()
	case n < 93:
		r.racing()
	default:
		rep, err := r.rec.Repair(ctx, r.v.ID)
		r.log("reconcile --fix: %v %v", kinds(rep), err)
	}
}

// order places an order of a random buyer, quantity and (maybe) key: a
// new key, or one sent before (a retry).
func (r *modelRun) order() {
	req := flashsale.OrderRequest{VoucherID: r.v.ID, UserID: 1 + r.rng.Int64N(5), Quantity: 1 + r.rng.IntN(r.v.BuyerLimit())}
	if r.rng.IntN(2) == 0 {
		req.IdempotencyKey = "k" + strconv.Itoa(r.rng.IntN(3))
	}
	svc := r.Svc
	if r.rng.IntN(2) == 0 {
		svc = r.other
	}
	o, err := svc.PlaceOrder(context.Background(), req)
	r.log("order user %d (shard %d) q %d key %q: %v %v", req.UserID, layout.HomeShard(req.UserID, len(r.shards)), req.Quantity, req.IdempotencyKey, id(o), code(err))
	if err != nil {
		return
	}
	k := strconv.FormatInt(req.UserID, 10) + ":" + req.IdempotencyKey
	if first, ok := r.keys[k]; ok && req.IdempotencyKey != "" && first.Quantity == o.Quantity {
		if o.ID != first.ID && (!r.lost || r.inMySQL(first.ID)) {
			r.fail("a retry with key %q got order %d; the key placed order %d", req.IdempotencyKey, o.ID, first.ID)
		}
	}
	if _, ok := r.keys[k]; !ok && req.IdempotencyKey != "" {
		r.keys[k] = o
	}
	r.orders = append(r.orders, o)
}

func (r *modelRun) withOrder(f func(o *flashsale.Order)) {
	if o := r.pick(); o != nil {
		f(o)
	}
}

// consume runs the consumer until the voucher's streams are drained (no
// entry left unacknowledged: exact, where the count in orders is kept by
// the gate and the acks): the consumer must make progress.
func (r *modelRun) consume() {
	stop := r.Run(consume.New(r.Client, r.DB, r.ConsumerConfig()))
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for r.backlog() > 0 {
		if time.Now().After(deadline) {
			r.fail("the consumer made no progress in 30s: backlog %d", r.backlog())
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, vk := range r.shards { // the count the gate and the acks keep
		n, err := r.Client.Do(context.Background(), r.Client.B().Hget().Key(vk.Meta).Field("queued").Build()).AsInt64()
		if (err != nil && !rueidis.IsRedisNil(err)) || n != 0 {
			r.fail("drained, but shard %s's backlog counts %d orders (%v)", vk.Body, n, err)
		}
	}
	r.log("consume: drained")
}

func (r *modelRun) backlog() int64 {
	var n int64
	for _, vk := range r.shards {
		_, b, _, err := layout.StreamBacklog(context.Background(), r.Client, vk, layout.DefaultGroup)
		if err == nil {
			n += b
		}
	}
	return n
}

// move moves stock between two shards, as a refill does.
func (r *modelRun) move() {
	if len(r.shards) < 2 {
		return
	}
	from, to := r.rng.IntN(len(r.shards)), r.rng.IntN(len(r.shards))
	if from == to {
		return
	}
	err := layout.Move(context.Background(), r.Client, r.shards[from], r.shards[to], "m"+strconv.Itoa(r.rng.Int()), 1+int64(r.rng.IntN(3)))
	r.log("move %d→%d: %v", from, to, err)
}

// lose deletes one shard's keys (a node restarted empty), or every
// shard's.
func (r *modelRun) lose(shard int, all bool) {
	for i, vk := range r.shards {
		if all || i == shard {
			r.Do(r.Client.B().Del().Key(vk.Meta, vk.Buyers, vk.Orders, vk.Keyed, vk.Returned, vk.Moves, vk.Applied, vk.Dead, vk.Failed, vk.Tries).Build())
		}
	}
	r.lost = true
	r.log("lose keys: shard %d, all %v", shard, all)
}

// reload reloads the voucher from one instance, or from two at once.
func (r *modelRun) reload() {
	ctx := context.Background()
	if r.rng.IntN(2) == 0 {
		r.log("reload: %v", code(r.Svc.Reload(ctx, r.v.ID)))
		return
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, svc := range []*async.Service{r.Svc, r.other} {
		wg.Go(func() { errs[i] = svc.Reload(ctx, r.v.ID) })
	}
	wg.Wait()
	r.log("two reloads at once: %v %v", code(errs[0]), code(errs[1]))
}

// racing runs a reload (after a loss of one shard's keys, or of all)
// at the same time as a cancel, an expiry, an order or a consumer run: the
// interleaving is the scheduler's, so a seed that fails here may need a
// few replays.
func (r *modelRun) racing() {
	r.lose(r.rng.IntN(len(r.shards)), r.rng.IntN(2) == 0)
	var other func()
	switch r.rng.IntN(4) {
	case 0:
		o := r.pick()
		if o == nil {
			return
		}
		other = func() { _, _ = r.Svc.CancelOrder(context.Background(), o.ID, o.UserID) }
	case 1:
		r.clock += 11 * time.Minute
		other = func() { _ = r.life.ExpireDue(context.Background(), lifecycle.ExpirerConfig{}) }
	case 2:
		other = r.order
	default:
		other = r.consume
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.log("racing reload: %v", code(r.other.Reload(context.Background(), r.v.ID))) })
	wg.Go(other)
	wg.Wait()
}

// pick returns a random order the gate accepted, nil when none.
func (r *modelRun) pick() *flashsale.Order {
	if len(r.orders) == 0 {
		return nil
	}
	return r.orders[r.rng.IntN(len(r.orders))]
}

// settle drains the consumer, sweeps the returns and reconciles: then no
// unit may be lost, unless reconcile reports it after a loss of keys.
func (r *modelRun) settle() {
	ctx := context.Background()
	r.reload()
	r.consume()
	if err := r.life.SweepReturns(ctx, lifecycle.ExpirerConfig{SweepAfter: time.Nanosecond}); err != nil {
		r.fail("sweep: %v", err)
		return
	}
	rep, err := r.rec.Repair(ctx, r.v.ID)
	if err == nil {
		rep, err = r.rec.Check(ctx, r.v.ID)
	}
	if err != nil {
		r.fail("reconcile: %v", err)
		return
	}
	r.log("settled: reconcile %v", kinds(rep))
	if !r.check("settled") {
		return
	}
	w := r.world()
	if !w.loaded {
		return
	}
	if w.gate != w.remaining && !(r.lost && w.gate < w.remaining && len(rep.Diffs) > 0) {
		r.fail("settled: gate stock %d, MySQL remaining %d (reconcile: %v); want them equal, or less and reported after a loss", w.gate, w.remaining, kinds(rep))
	}
}

// modelState is what Redis and MySQL hold of the voucher.
type modelState struct {
	loaded          bool
	gate            int           // units the gate can sell: stock and units moving, of the loaded shards
	remaining       int           // MySQL's
	live            int           // units of MySQL's live orders
	streamed        int           // units of stream entries MySQL does not hold
	buyers          map[int64]int // live units per buyer, MySQL's and the stream's
	stored          map[int64]bool
	streamedByBuyer map[int64]int
}

// world reads the voucher's state, Redis first.
func (r *modelRun) world() modelState {
	ctx := context.Background()
	w := modelState{buyers: map[int64]int{}, stored: map[int64]bool{}, streamedByBuyer: map[int64]int{}}
	st, err := layout.ReadShards(ctx, r.Client, r.shards)
	if err != nil {
		r.T.Fatal(err)
	}
	type entry struct {
		order, user int64
		q           int
	}
	var entries []entry
	for i, sh := range st {
		if sh.Loaded {
			w.loaded = true
			w.gate += int(sh.Stock + layout.JournalUnits(sh.Moves))
		}
		xs, _ := r.Client.Do(ctx, r.Client.B().Xrange().Key(r.shards[i].Orders).Start("-").End("+").Build()).AsXRange()
		for _, x := range xs {
			orders, _ := layout.ParseEntry(r.v.ID, x.ID, x.FieldValues)
			for _, o := range orders {
				entries = append(entries, entry{o.ID, o.UserID, o.Units()})
			}
		}
	}
	if err := r.SQL.QueryRow("SELECT remaining FROM vouchers WHERE id = ?", r.v.ID).Scan(&w.remaining); err != nil {
		r.T.Fatal(err)
	}
	rows, err := r.SQL.Query("SELECT id, user_id, quantity, status IN ('pending', 'awaiting_payment', 'paid', 'created') FROM orders WHERE voucher_id = ?", r.v.ID)
	if err != nil {
		r.T.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, user int64
		var q int
		var live bool
		if err := rows.Scan(&id, &user, &q, &live); err != nil {
			r.T.Fatal(err)
		}
		w.stored[id] = true
		if live {
			w.live += q
			w.buyers[user] += q
		}
	}
	for _, e := range entries {
		if !w.stored[e.order] {
			w.streamed += e.q
			w.buyers[e.user] += e.q
			w.streamedByBuyer[e.user] += e.q
		}
	}
	return w
}

// shardTrace describes each shard's meta and journal.
func (r *modelRun) shardTrace() string {
	var b strings.Builder
	for _, vk := range r.shards {
		m, _ := r.Client.Do(context.Background(), r.Client.B().Hgetall().Key(vk.Meta).Build()).AsStrMap()
		j, _ := r.Client.Do(context.Background(), r.Client.B().Hgetall().Key(vk.Moves).Build()).AsStrMap()
		fmt.Fprintf(&b, "[stock %s initial %s returned %s journal %v]", m["stock"], m["initial"], m["returned"], j)
	}
	return b.String()
}

func (r *modelRun) inMySQL(id int64) bool { return r.world().stored[id] }

// check checks the invariants that hold after every step.
func (r *modelRun) check(when string) bool {
	if r.T.Failed() {
		return false
	}
	w := r.world()
	r.log("  → gate %d, remaining %d, live %d, streamed %d %s", w.gate, w.remaining, w.live, w.streamed, r.shardTrace())
	if w.gate+w.live+w.streamed > r.v.Stock {
		return r.fail("%s: sold twice: gate stock %d + live units %d + units in the stream %d > stock %d", when, w.gate, w.live, w.streamed, r.v.Stock)
	}
	for u, n := range w.buyers {
		if n > r.v.BuyerLimit() {
			return r.fail("%s: buyer %d holds %d units (%d in the stream), limit %d", when, u, n, w.streamedByBuyer[u], r.v.BuyerLimit())
		}
	}
	return true
}

func code(err error) string {
	if err == nil {
		return "ok"
	}
	if c := flashsale.ErrorCode(err); c != flashsale.EInternal {
		return c
	}
	return err.Error()
}

func id(o *flashsale.Order) int64 {
	if o == nil {
		return 0
	}
	return o.ID
}

func kinds(rep *reconcile.Report) []string {
	if rep == nil {
		return nil
	}
	var ks []string
	for _, d := range rep.Diffs {
		ks = append(ks, string(d.Kind))
	}
	return ks
}
