package async

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// The gate's side of a sharded voucher: a buyer orders on the home shard,
// which borrows stock from the others when it runs dry, and a shard lost
// from Redis is reloaded alone. How shards are laid out and how stock
// moves between them is in internal/layout (shard.go).

// shardLocal sets the shards' keys of a voucher in its local state, from
// its row (read from MySQL once per instance) or, while MySQL does not
// answer, from the shard count Redis records, so a loaded voucher sells
// through a MySQL outage as before.
func (s *Service) shardLocal(ctx context.Context, l *local, voucherID int64) error {
	v, err := s.static(ctx, voucherID)
	n := v.ShardCount()
	if err != nil {
		if flashsale.ErrorCode(err) == flashsale.ENotFound {
			return err
		}
		if n, err = layout.ShardCount(ctx, s.client, s.keys, voucherID); err != nil {
			return unavailable(fmt.Sprintf("voucher %d", voucherID), err)
		}
	}
	if n > 1 {
		l.shards, l.levels = s.keys.Shards(voucherID, n), newLevels(n)
	}
	return nil
}

// maxRefills bounds how often one order refills its home shard; past it
// the buyer is answered busy (others keep draining what is moved to it).
const maxRefills = 8

// askShards decides an order of a sharded voucher on the buyer's home
// shard, refilling the shard from the others while it holds fewer units
// than asked. It refuses sold_out only after two refills in a row found
// every other shard dry and no units in a journal: the two reads are
// pipelined over several nodes, not atomic, and a move between two shards
// can slip past one read, not past two.
func (s *Service) askShards(ctx context.Context, l *local, req flashsale.OrderRequest, orderID int64) (*flashsale.Order, error) {
	if s.cfg.Durability.Mode == DurabilityReplica {
		return nil, flashsale.Errorf(flashsale.EUnavailable, "voucher %d has shards, which durability replica does not support", req.VoucherID)
	}
	home := layout.HomeShard(req.UserID, len(l.shards))
	keys := l.shards[home].Gate()
	args := orderArgs(req, orderID)
	dry := 0
	for attempt := 0; ; attempt++ {
		c := &gateCall{ctx: ctx, args: args, level: &l.levels[home]}
		notices := l.notices.Load()
		err := s.gate(req.VoucherID, keys, len(l.shards), c)
		if err == errGateBusy {
			return nil, busy()
		}
		if err != nil {
			return nil, unavailable("gate", err)
		}
		if c.reply.code != gateSoldOut {
			return s.decodeGateReply(ctx, l, c.reply, req, orderID, home, c.seen, notices)
		}
		if attempt == maxRefills {
			e := flashsale.Errorf(flashsale.EBusy, "stock is moving between the voucher's shards; try again")
			e.RetryAfter = time.Second
			return nil, e
		}
		moved, err := s.refill(ctx, req.VoucherID, l.shards, home, strconv.FormatInt(orderID, 10)+"."+strconv.Itoa(attempt), int64(req.Units()))
		if err != nil {
			return nil, err
		}
		if moved {
			dry = 0
			continue
		}
		if dry++; dry == 2 {
			return s.decodeGateReply(ctx, l, c.reply, req, orderID, home, c.seen, notices)
		}
	}
}

// refill moves stock to shard home of a voucher, which needs q units: it
// completes the moves the journals hold (their movers may have died), or
// else takes from the fullest other shard half its stock, or what home
// lacks if that is more. It reports whether anything moved; false means
// every other shard was dry and no journal held units. A shard missing
// from Redis is reloaded first.
func (s *Service) refill(ctx context.Context, voucherID int64, shards []layout.VoucherKeys, home int, moveID string, q int64) (bool, error) {
	st, err := layout.ReadShards(ctx, s.client, shards)
	if err != nil {
		return false, unavailable("read shards", err)
	}
	donor, completed := -1, 0
	for i, sh := range st {
		if !sh.Loaded {
			return true, s.Reload(ctx, voucherID)
		}
		n, err := layout.CompleteMoves(ctx, s.client, s.keys, shards[i], sh.Moves)
		if err != nil {
			return false, unavailable("complete moves", err)
		}
		completed += n
		if i != home && sh.Stock > 0 && (donor < 0 || sh.Stock > st[donor].Stock) {
			donor = i
		}
	}
	if completed > 0 || donor < 0 {
		return completed > 0, nil
	}
	if err := layout.Move(ctx, s.client, shards[donor], shards[home], moveID, q-st[home].Stock); err != nil {
		return false, unavailable("move stock", err)
	}
	return true, nil
}

// loadShards loads the shards of a voucher listed in missing, from a
// snapshot: free units are split evenly among them, and each gets the
// buyers of orders whose home it is (with their units counted in its
// initial stock), so that every shard keeps stock + held units = initial.
func (s *Service) loadShards(ctx context.Context, v *flashsale.Voucher, shards []layout.VoucherKeys, missing []int, free int, snap snapshot) error {
	cmd := s.client.B().Set().Key(s.keys.ShardCountKey(v.ID)).Value(strconv.Itoa(len(shards))).Build()
	if err := s.client.Do(ctx, cmd).Error(); err != nil {
		return err
	}
	homed := make([]snapshot, len(shards))
	held := make([]int, len(shards)) // units of the live orders homed on each
	for _, o := range snap.orders {
		k := layout.HomeShard(o.UserID, len(shards))
		homed[k].orders = append(homed[k].orders, o)
		if o.Status.Live() {
			held[k] += o.Units()
		}
	}
	for _, o := range snap.keyed {
		k := layout.HomeShard(o.UserID, len(shards))
		homed[k].keyed = append(homed[k].keyed, o)
	}
	free = max(free, 0)
	for i, k := range missing {
		share := free / len(missing)
		if i < free%len(missing) {
			share++
		}
		homed[k].fences = snap.fences
		if err := s.loadKeys(ctx, shards[k], v, homed[k], share, share+held[k]); err != nil {
			return fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return nil
}

// reloadShards loads the shards of a voucher missing from Redis (all of
// them after Redis lost its data, or one node's in a cluster). The units
// they get are MySQL's remaining stock less what the shards still loaded
// hold: their stock, the units of their orders not persisted yet (not
// acknowledged: layout.Unacked), the units in their
// journals, and the returns that come to them after their stock was read
// (returnsToCome). Redis is read before MySQL, so an order persisted in
// between is counted twice, never missed: the estimate errs towards
// selling less (reconcile reports it), never twice.
func (s *Service) reloadShards(ctx context.Context, v *flashsale.Voucher) error {
	shards := s.keys.Shards(v.ID, v.ShardCount())
	st, err := layout.ReadShards(ctx, s.client, shards)
	if err != nil {
		return unavailable(fmt.Sprintf("reload voucher %d", v.ID), err)
	}
	var missing []int
	var lost []layout.VoucherKeys
	held := 0
	for k, sh := range st {
		if !sh.Loaded {
			missing, lost = append(missing, k), append(lost, shards[k])
			continue
		}
		unacked, err := layout.Unacked(ctx, s.client, shards[k], s.cfg.Group)
		if err != nil {
			return unavailable(fmt.Sprintf("reload voucher %d", v.ID), err)
		}
		backlog := int64(0)
		for _, q := range unacked {
			backlog += q
		}
		held += int(sh.Stock + backlog + layout.JournalUnits(sh.Moves))
	}
	if len(missing) == 0 {
		return nil
	}
	if !time.Now().Before(v.EndTime) {
		return refusal(flashsale.EEnded, 0)
	}
	row, snap, err := s.readSnapshot(ctx, v.ID, lost)
	if err != nil {
		return err
	}
	coming, err := s.returnsToCome(ctx, shards, st, snap.orders)
	if err != nil {
		return unavailable(fmt.Sprintf("reload voucher %d", v.ID), err)
	}
	free := row.Remaining - held - coming
	if err := s.loadShards(ctx, row, shards, missing, free, snap); err != nil {
		return unavailable(fmt.Sprintf("reload voucher %d", v.ID), err)
	}
	s.logLoaded(v.ID, free, len(snap.orders))
	return nil
}

// returnsToCome returns the units that returns add to the shards loaded
// when st was read, beyond their stock then, and that MySQL's remaining
// in a snapshot read after st counts already: the returns run since (the
// rise of each shard's returned count) and those still to run (closed
// orders of the snapshot homed there, not in the shard's returned hash).
// Each order's membership is read before the count, so a return between
// the two is counted twice (selling less), never missed.
func (s *Service) returnsToCome(ctx context.Context, shards []layout.VoucherKeys, st []layout.ShardState, orders []flashsale.Order) (int, error) {
	var cmds []rueidis.Completed
	var units []int // the units each HEXISTS stands for
	for _, o := range orders {
		k := layout.HomeShard(o.UserID, len(shards))
		if !o.Status.Live() && st[k].Loaded {
			cmds = append(cmds, s.client.B().Hexists().Key(shards[k].Returned).Field(strconv.FormatInt(o.ID, 10)).Build())
			units = append(units, o.Units())
		}
	}
	var counted []int // the shards each HGET of the count reads
	for k, sh := range st {
		if sh.Loaded {
			cmds = append(cmds, s.client.B().Hget().Key(shards[k].Meta).Field("returned").Build())
			counted = append(counted, k)
		}
	}
	res := s.client.DoMulti(ctx, cmds...)
	coming := 0
	for i, q := range units {
		done, err := res[i].AsBool()
		if err != nil {
			return 0, err
		}
		if !done {
			coming += q
		}
	}
	for i, k := range counted {
		n, err := res[len(units)+i].AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return 0, err
		}
		coming += max(int(n-st[k].Returned), 0)
	}
	return coming, nil
}

// keysOf returns the keys of each of a voucher's shards as its local state
// knows them: the voucher's one set when it has one shard.
func (l *local) keysOf(keys layout.Keyspace, voucherID int64) []layout.VoucherKeys {
	if l.shards != nil {
		return l.shards
	}
	return []layout.VoucherKeys{keys.Voucher(voucherID)}
}

// buyerKeys returns the keys of the shard that holds a buyer of a voucher:
// its home shard, or the voucher's keys when it has one shard (or its row
// cannot be read: FindOrder then finds the order pending only if that is
// where it is).
func (s *Service) buyerKeys(ctx context.Context, voucherID, userID int64) layout.VoucherKeys {
	if l, ok := s.locals.Load(voucherID); ok {
		shards := l.(*local).keysOf(s.keys, voucherID)
		return shards[layout.HomeShard(userID, len(shards))]
	}
	v, err := s.static(ctx, voucherID)
	if err != nil || v.ShardCount() == 1 {
		return s.keys.Voucher(voucherID)
	}
	return s.keys.Shards(voucherID, v.ShardCount())[layout.HomeShard(userID, v.ShardCount())]
}

// BuyerHashTag returns the hash tag (without braces) of the shard that
// holds a buyer of a voucher: "v<id>", or a shard's "v<id>.<n>". The
// idempotency keys of the buyer's orders go there (idempotency.Config).
func (s *Service) BuyerHashTag(ctx context.Context, voucherID, userID int64) string {
	return "v" + s.buyerKeys(ctx, voucherID, userID).Body
}
