package async

import (
	"context"
	_ "embed" // the Lua scripts
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
)

var (
	//go:embed take.lua
	takeLua string
	//go:embed give.lua
	giveLua string

	takeScript = rueidis.NewLuaScript(takeLua)
	giveScript = rueidis.NewLuaScript(giveLua)
)

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
		if n, err = shardCount(ctx, s.client, s.keys, voucherID); err != nil {
			return unavailable(fmt.Sprintf("voucher %d", voucherID), err)
		}
	}
	if n > 1 {
		l.shards, l.levels = s.keys.shards(voucherID, n), newLevels(n)
	}
	return nil
}

// maxRefills bounds how often one order refills its home shard; past it
// the buyer is answered busy (others keep draining what is moved to it).
const maxRefills = 8

// askShards decides an order of a sharded voucher on the buyer's home
// shard, refilling the shard from the others while it is dry (see
// shard.go). It refuses sold_out only after two refills in a row found
// every shard dry and no units in a journal: the two reads are pipelined
// over several nodes, not atomic, and a move between two shards can slip
// past one read, not past two.
func (s *Service) askShards(ctx context.Context, l *local, voucherID, userID, orderID int64) (*flashsale.Order, error) {
	if s.cfg.Durability.Mode == DurabilityReplica {
		return nil, flashsale.Errorf(flashsale.EUnavailable, "voucher %d has shards, which durability replica does not support", voucherID)
	}
	home := homeShard(userID, len(l.shards))
	vk := l.shards[home]
	keys := []string{vk.meta, vk.buyers, vk.orders}
	args := []string{strconv.FormatInt(userID, 10), strconv.FormatInt(orderID, 10)}
	dry := 0
	for attempt := 0; ; attempt++ {
		c := &gateCall{ctx: ctx, args: args, level: &l.levels[home]}
		err := s.gate(voucherID, keys, c)
		res := c.reply
		if err != nil {
			return nil, unavailable("gate", err)
		}
		if code, _ := res[0].AsInt64(); code != gateSoldOut {
			return s.decodeGateReply(l, res, voucherID, userID, orderID, home, c.seen)
		}
		if attempt == maxRefills {
			e := flashsale.Errorf(flashsale.EBusy, "stock is moving between the voucher's shards; try again")
			e.RetryAfter = time.Second
			return nil, e
		}
		moved, err := s.refill(ctx, voucherID, l.shards, home, strconv.FormatInt(orderID, 10)+"."+strconv.Itoa(attempt))
		if err != nil {
			return nil, err
		}
		if moved {
			dry = 0
			continue
		}
		if dry++; dry == 2 {
			l.remember(flashsale.ESoldOut, s.cfg.VerdictTTL, 0)
			return nil, refusal(flashsale.ESoldOut, 0)
		}
	}
}

// shardState is what readShards finds of one shard.
type shardState struct {
	loaded bool
	stock  int64
	moves  map[string]string // the journal: move id → "<to body>:<units>"
}

// readShards reads every shard's stock and journal in one pipeline.
func readShards(ctx context.Context, client rueidis.Client, shards []voucherKeys) ([]shardState, error) {
	cmds := make(rueidis.Commands, 0, 2*len(shards))
	for _, vk := range shards {
		cmds = append(cmds, client.B().Hget().Key(vk.meta).Field("stock").Build(), client.B().Hgetall().Key(vk.moves).Build())
	}
	res := client.DoMulti(ctx, cmds...)
	out := make([]shardState, len(shards))
	for i := range shards {
		stock, err := res[2*i].AsInt64()
		loaded := err == nil
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, err
		}
		moves, err := res[2*i+1].AsStrMap()
		if err != nil {
			return nil, err
		}
		out[i] = shardState{loaded: loaded, stock: stock, moves: moves}
	}
	return out, nil
}

// refill moves stock to shard home of a voucher: it completes the moves
// the journals hold (their movers may have died), or else takes half of
// the fullest other shard's stock. It reports whether anything moved;
// false means every shard was dry and no journal held units. A shard
// missing from Redis is reloaded first.
func (s *Service) refill(ctx context.Context, voucherID int64, shards []voucherKeys, home int, moveID string) (bool, error) {
	st, err := readShards(ctx, s.client, shards)
	if err != nil {
		return false, unavailable("read shards", err)
	}
	donor, completed := -1, 0
	for i, sh := range st {
		if !sh.loaded {
			return true, s.Reload(ctx, voucherID)
		}
		n, err := completeMoves(ctx, s.client, s.keys, shards[i], sh.moves)
		if err != nil {
			return false, unavailable("complete moves", err)
		}
		completed += n
		if i != home && sh.stock > 0 && (donor < 0 || sh.stock > st[donor].stock) {
			donor = i
		}
	}
	if completed > 0 || donor < 0 {
		return completed > 0, nil
	}
	if err := move(ctx, s.client, shards[donor], shards[home], moveID); err != nil {
		return false, unavailable("move stock", err)
	}
	return true, nil
}

// move takes units from one shard and adds them to another, in the three
// steps shard.go describes; a failure past the first leaves the move in
// the donor's journal, for completeMoves.
func move(ctx context.Context, client rueidis.Client, from, to voucherKeys, moveID string) error {
	n, err := takeScript.Exec(ctx, client, []string{from.meta, from.moves}, []string{moveID, to.body}).AsInt64()
	if err != nil || n == 0 {
		return err
	}
	_, err = completeMove(ctx, client, from, to, moveID, n)
	return err
}

// completeMove runs steps 2 and 3 of a move: give.lua on the recipient,
// then the journal entry's deletion. It reports whether the move is done;
// not when the recipient is not loaded (the entry stays).
func completeMove(ctx context.Context, client rueidis.Client, from, to voucherKeys, moveID string, n int64) (bool, error) {
	r, err := giveScript.Exec(ctx, client, []string{to.meta, to.applied}, []string{moveID, strconv.FormatInt(n, 10)}).AsInt64()
	if err != nil || r < 0 {
		return false, err
	}
	return true, client.Do(ctx, client.B().Hdel().Key(from.moves).Field(moveID).Build()).Error()
}

// completeMoves completes the moves in a shard's journal and returns how
// many it completed.
func completeMoves(ctx context.Context, client rueidis.Client, keys keyspace, from voucherKeys, journal map[string]string) (int, error) {
	done := 0
	for id, val := range journal {
		to, n, err := parseMove(val)
		if err != nil {
			return done, fmt.Errorf("move %s in %s: %w", id, from.moves, err)
		}
		ok, err := completeMove(ctx, client, from, keys.tagged(to), id, n)
		if err != nil {
			return done, err
		}
		if ok {
			done++
		}
	}
	return done, nil
}

// parseMove reads a journal entry, "<to body>:<units>".
func parseMove(val string) (to string, n int64, err error) {
	to, units, ok := strings.Cut(val, ":")
	if ok {
		n, err = strconv.ParseInt(units, 10, 64)
	}
	if !ok || err != nil || n <= 0 || to == "" {
		return "", 0, errors.New("malformed move " + strconv.Quote(val))
	}
	return to, n, nil
}
