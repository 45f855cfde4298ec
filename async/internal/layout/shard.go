package layout

import (
	"context"
	_ "embed" // the Lua scripts
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/hashslot"
)

// Shards: one hot voucher on several Redis nodes.
//
// A voucher's gate runs on one slot, so one Redis core bounds a single
// voucher however large the cluster. A voucher created with Shards = K > 1
// splits its stock into K shards, each a whole set of the voucher's keys
// (meta, buyers, orders stream, dead letters…) under its own hash tag:
//
//	shard 0       {v<id>}       the keys of an unsharded voucher
//	shard k ≥ 1   {v<id>.<n>}   n chosen so the shards' slots spread (ShardTags)
//
// One order per buyer: a buyer always orders on the home shard
// hash(user) mod K (HomeShard), whose buyers hash is the only one that can
// hold them, so gate.lua's check holds across shards.
//
// No undersell: a buyer whose home shard is dry has it borrow stock from
// another shard. The move spans two slots, so it is a recoverable
// three-step transfer: take.lua on the donor takes n units and records
// {id, to, n} in the donor's moves journal; give.lua on the home shard
// adds n unless the id is in its applied set; the donor's journal entry is
// then deleted. A mover killed between the steps leaves the journal entry,
// which the next buyer to find the voucher dry, a reload, or reconcile
// completes (give.lua is idempotent). A buyer is refused sold_out only
// when every shard is dry and no journal holds units, read twice.
//
// Each shard's meta keeps stock + buyers = initial: a move lowers the
// donor's initial with its stock and raises the recipient's, so the sum of
// the shards' initial plus the units in journals is the voucher's stock.
// The consumers read every shard's stream (each is in the registry, as
// "<id>" or "<id>.<n>"); MySQL keeps one row per voucher.

var (
	//go:embed take.lua
	takeLua string
	//go:embed give.lua
	giveLua string

	takeScript = rueidis.NewLuaScript(takeLua)
	giveScript = rueidis.NewLuaScript(giveLua)
)

// HomeShard returns the shard a buyer orders on, of shards: Fibonacci
// hashing of the user id, so consecutive ids spread over the shards.
func HomeShard(userID int64, shards int) int {
	if shards <= 1 {
		return 0
	}
	return int((uint64(userID) * 0x9E3779B97F4A7C15 >> 33) % uint64(shards))
}

// ShardTags returns the tag bodies of a voucher's shards ("<id>",
// "<id>.<n>"…), shard 0 first; K shards land on K different slot ranges,
// spread evenly over the masters whatever their number divides.
func ShardTags(voucherID int64, shards int) []string {
	base := strconv.FormatInt(voucherID, 10)
	tags := []string{base}
	if shards <= 1 {
		return tags
	}
	// A cluster's masters usually own contiguous, equal slot ranges, so
	// shard k's tag is the first "<id>.<n>" whose slot falls in the k-th of
	// K equal slot ranges counted on from shard 0's.
	segment := func(tag string) int { return hashslot.Of("{v"+tag+"}") * shards / hashslot.Slots }
	first := segment(base)
	for k, n := 1, 0; k < shards; k++ {
		want := (first + k) % shards
		for ; ; n++ {
			tag := base + "." + strconv.Itoa(n)
			if segment(tag) == want {
				tags = append(tags, tag)
				n++
				break
			}
		}
	}
	return tags
}

// Shards returns the keys of every shard of a voucher, shard 0 first.
func (k Keyspace) Shards(voucherID int64, shards int) []VoucherKeys {
	tags := ShardTags(voucherID, shards)
	out := make([]VoucherKeys, len(tags))
	for i, t := range tags {
		out[i] = k.Tagged(t)
	}
	return out
}

// ShardCountKey returns the key holding a sharded voucher's number of
// shards, in shard 0's slot, for tools that know only the voucher's id. It
// is missing for a voucher with one shard.
func (k Keyspace) ShardCountKey(voucherID int64) string {
	return k.prefix + "{v" + strconv.FormatInt(voucherID, 10) + "}:shards"
}

// ShardCount returns a voucher's number of shards as Redis records it.
func ShardCount(ctx context.Context, client rueidis.Client, k Keyspace, voucherID int64) (int, error) {
	n, err := client.Do(ctx, client.B().Get().Key(k.ShardCountKey(voucherID)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 1, nil
	}
	return max(int(n), 1), err
}

// ShardState is what ReadShards finds of one shard.
type ShardState struct {
	Loaded bool
	Stock  int64
	// Returned is the units of closed orders put back on the shard so
	// far (meta's returned), read with Stock.
	Returned int64
	Moves    map[string]string // the journal: move id → "<to body>:<units>"
}

// ReadShards reads every shard's stock and journal in one pipeline.
func ReadShards(ctx context.Context, client rueidis.Client, shards []VoucherKeys) ([]ShardState, error) {
	cmds := make(rueidis.Commands, 0, 2*len(shards))
	for _, vk := range shards {
		cmds = append(cmds, client.B().Hmget().Key(vk.Meta).Field(FieldStock, "returned").Build(), client.B().Hgetall().Key(vk.Moves).Build())
	}
	res := client.DoMulti(ctx, cmds...)
	out := make([]ShardState, len(shards))
	for i := range shards {
		fields, err := res[2*i].ToArray()
		if err != nil {
			return nil, err
		}
		stock, err := fields[0].AsInt64()
		loaded := err == nil
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, err
		}
		returned, _ := fields[1].AsInt64() // absent: none yet
		moves, err := res[2*i+1].AsStrMap()
		if err != nil {
			return nil, err
		}
		out[i] = ShardState{Loaded: loaded, Stock: stock, Returned: returned, Moves: moves}
	}
	return out, nil
}

// Take runs step 1 of a move: take.lua takes half the donor's stock, or
// want units if that is more (as much as it has), and records the move in
// its journal. It returns the units taken, 0 when the donor has none.
func Take(ctx context.Context, client rueidis.Client, from, to VoucherKeys, moveID string, want int64) (int64, error) {
	return takeScript.Exec(ctx, client, []string{from.Meta, from.Moves}, []string{moveID, to.Body, strconv.FormatInt(want, 10)}).AsInt64()
}

// Move takes units from one shard (half its stock, or want if that is
// more) and adds them to another, in the three steps above; a failure past
// the first leaves the move in the donor's journal, for CompleteMoves.
func Move(ctx context.Context, client rueidis.Client, from, to VoucherKeys, moveID string, want int64) error {
	n, err := Take(ctx, client, from, to, moveID, want)
	if err != nil || n == 0 {
		return err
	}
	_, err = CompleteMove(ctx, client, from, to, moveID, n)
	return err
}

// CompleteMove runs steps 2 and 3 of a move of n units: give.lua on the
// recipient, then the journal entry's deletion. It reports whether the
// move is done; not when the recipient is not loaded (the entry stays).
func CompleteMove(ctx context.Context, client rueidis.Client, from, to VoucherKeys, moveID string, n int64) (bool, error) {
	r, err := giveScript.Exec(ctx, client, []string{to.Meta, to.Applied}, []string{moveID, strconv.FormatInt(n, 10)}).AsInt64()
	if err != nil || r < 0 {
		return false, err
	}
	return true, client.Do(ctx, client.B().Hdel().Key(from.Moves).Field(moveID).Build()).Error()
}

// CompleteMoves completes the moves in a shard's journal and returns how
// many it completed.
func CompleteMoves(ctx context.Context, client rueidis.Client, k Keyspace, from VoucherKeys, journal map[string]string) (int, error) {
	done := 0
	for id, val := range journal {
		to, n, err := parseMove(val)
		if err != nil {
			return done, fmt.Errorf("move %s in %s: %w", id, from.Moves, err)
		}
		ok, err := CompleteMove(ctx, client, from, k.Tagged(to), id, n)
		if err != nil {
			return done, err
		}
		if ok {
			done++
		}
	}
	return done, nil
}

// JournalUnits sums the units of a journal's moves.
func JournalUnits(journal map[string]string) int64 {
	var n int64
	for _, val := range journal {
		if _, units, err := parseMove(val); err == nil {
			n += units
		}
	}
	return n
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
