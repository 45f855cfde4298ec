package async

import (
	"context"
	"strconv"
	"strings"

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
//	shard k ≥ 1   {v<id>.<n>}   n chosen so the shards' slots spread (shardTags)
//
// One order per buyer: a buyer always orders on the home shard
// hash(user) mod K (homeShard), whose buyers hash is the only one that can
// hold them, so gate.lua's check holds across shards.
//
// No undersell: a buyer whose home shard is dry has it borrow stock from
// another shard. The move spans two slots, so it is a recoverable
// three-step transfer (shardmove.go): take.lua on the donor takes n units
// and records {id, to, n} in the donor's moves journal; give.lua on the
// home shard adds n unless the id is in its applied set; the donor's
// journal entry is then deleted. A mover killed between the steps leaves
// the journal entry, which the next buyer to find the voucher dry, a
// reload, or reconcile completes (give.lua is idempotent). A buyer is
// refused sold_out only when every shard is dry and no journal holds
// units, read twice.
//
// Each shard's meta keeps stock + buyers = initial: a move lowers the
// donor's initial with its stock and raises the recipient's, so the sum of
// the shards' initial plus the units in journals is the voucher's stock.
// The consumers read every shard's stream (each is in the registry, as
// "<id>" or "<id>.<n>"); MySQL keeps one row per voucher.

// homeShard returns the shard a buyer orders on: Fibonacci hashing of the
// user id, so consecutive ids spread over the shards.
func homeShard(userID int64, shards int) int {
	if shards <= 1 {
		return 0
	}
	return int((uint64(userID) * 0x9E3779B97F4A7C15 >> 33) % uint64(shards))
}

// shardTags returns the tag bodies of a voucher's shards ("<id>",
// "<id>.<n>"…). A cluster's masters usually own contiguous, equal slot
// ranges, so shard k's tag is the first "<id>.<n>" whose slot falls in
// the k-th of K equal slot ranges counted on from shard 0's: K shards land
// on K different ranges, spread evenly over the masters whatever their
// number divides.
func shardTags(voucherID int64, shards int) []string {
	base := strconv.FormatInt(voucherID, 10)
	tags := []string{base}
	if shards <= 1 {
		return tags
	}
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

// tagged returns the keys under the hash tag {v<body>}: a voucher's when
// body is its id, a shard's when body is a shard tag.
func (k keyspace) tagged(body string) voucherKeys {
	tag := k.prefix + "{v" + body + "}:"
	return voucherKeys{
		meta:    tag + "meta",
		buyers:  tag + "buyers",
		orders:  tag + "orders",
		dead:    tag + "dead",
		failed:  tag + "failed",
		tries:   tag + "tries",
		sync:    tag + "sync",
		moves:   tag + "moves",
		applied: tag + "applied",
		body:    body,
	}
}

// shards returns the keys of every shard of a voucher, shard 0 first.
func (k keyspace) shards(voucherID int64, shards int) []voucherKeys {
	tags := shardTags(voucherID, shards)
	out := make([]voucherKeys, len(tags))
	for i, t := range tags {
		out[i] = k.tagged(t)
	}
	return out
}

// parseMember reads a registry member, "<id>" or "<id>.<n>": the voucher
// and the tag body of its shard's keys.
func parseMember(m string) (voucherID int64, body string, ok bool) {
	id, _, _ := strings.Cut(m, ".")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", false
	}
	return n, m, true
}

// keysOf returns the keys of each of a voucher's shards as its local state
// knows them: the voucher's one set when it has one shard.
func (l *local) keysOf(keys keyspace, voucherID int64) []voucherKeys {
	if l.shards != nil {
		return l.shards
	}
	return []voucherKeys{keys.voucher(voucherID)}
}

// buyerKeys returns the keys of the shard that holds a buyer of a voucher:
// its home shard, or the voucher's keys when it has one shard (or its row
// cannot be read: FindOrder then finds the order pending only if that is
// where it is).
func (s *Service) buyerKeys(ctx context.Context, voucherID, userID int64) voucherKeys {
	if l, ok := s.locals.Load(voucherID); ok {
		shards := l.(*local).keysOf(s.keys, voucherID)
		return shards[homeShard(userID, len(shards))]
	}
	v, err := s.static(ctx, voucherID)
	if err != nil || v.ShardCount() == 1 {
		return s.keys.voucher(voucherID)
	}
	return s.keys.shards(voucherID, v.ShardCount())[homeShard(userID, v.ShardCount())]
}
