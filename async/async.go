// Package async takes seckill orders the fast way: a Lua script in Redis
// decides, atomically, whether a buyer gets an item, the buyer gets an
// answer at once, and a consumer persists the order to MySQL in the
// background. It closes the two gaps this design usually leaves open
// (memory limits and data safety): what the gate accepted is as durable as
// the chosen durability mode promises, nothing is sold twice, and the queue
// in Redis holds only what is not persisted yet.
//
// # Keys
//
// Every voucher's keys share one hash tag, so each script touches one slot
// and the package runs unchanged on Redis Cluster:
//
//	<prefix>{v<id>}:meta    hash: stock (left), initial, begin, end (µs since 1970), given (units given back), loaded (µs)
//	<prefix>{v<id>}:buyers  hash: user id → order id
//	<prefix>{v<id>}:orders  stream of accepted orders (fields o, u), consumer group "persist"
//	<prefix>{v<id>}:dead    dead-letter stream: orders that can never be persisted, with the reason
//	<prefix>{v<id>}:failed  hash: user id → order id that was dead-lettered
//	<prefix>{v<id>}:sync    durability replica: written before each WAIT, expires
//	<prefix>{v<id>}:moves   sharded: hash of units in transfer to another shard
//	<prefix>{v<id>}:applied sharded: set of the transfers added to this shard
//	<prefix>{v<id>.<n>}:…   the same keys for shard k ≥ 1 of a sharded voucher (shard.go)
//	<prefix>{p<bucket>}     order pointers: hash order id → "<voucher>:<user>" of the ids of
//	                        16 seconds (pointer.go), expires a day after its last write
//	<prefix>vouchers        set: ids of vouchers whose stream the consumers read
//	<prefix>epoch           random id written when Redis is found empty (see Service.WatchEpoch)
//	<prefix>{e<n>}:epoch    on Redis Cluster, the same for the master that owns the slot of
//	                        {e<n>} (one n per master: nodeepoch.go)
//	<prefix>epochs          stream: the data losses services noticed, for reconcile
//	<prefix>retiring        sorted set: finished vouchers → when their keys are deleted
//
// # The pipeline
//
// Service.PlaceOrder takes an order id from the ID generator, then runs
// gate.lua: sale window by Redis's clock, stock, one order per user; on
// success it takes one unit of stock, records the buyer and appends the
// order to the voucher's stream, all in one script. It then writes the
// order pointer (batched with the other orders accepted meanwhile:
// pointer.go) and answers "pending". Consumer reads each voucher's stream
// with a consumer group, persists batches with store.PersistOrders (one
// transaction, idempotent) and acknowledges them, trimming what every group
// has acknowledged. Reconciler compares Redis with MySQL and repairs what is
// safe to repair.
//
// # Memory
//
// An in-process queue would grow without bound. Here a voucher's stream
// holds only what some consumer group has not acknowledged: every
// acknowledgement trims the entries all groups are done with (ack.lua), so
// a sale of any length keeps the stream as long as the consumers' lag. A
// buyers hash holds at most the voucher's stock; order pointers expire
// (Config.PointerTTL); each instance refuses a sold-out or ended voucher
// itself for a while (Config.VerdictTTL), without a Redis call. The keys
// of a voucher whose sale is over, whose orders are all persisted and
// which reconciliation finds nothing to say about are deleted
// ConsumerConfig.RetireAfter later (retire.go); MySQL answers for it then.
//
// # What can be lost
//
// An accepted order lives only in Redis until the consumer persists it,
// usually for milliseconds. What a Redis crash or failover may take from
// that window depends on Config.Durability, which says when the gate may
// answer "pending":
//
//   - DurabilityMemory (the default): once Redis holds the order in
//     memory. A Redis restarted without its data (no AOF, or a crash
//     between everysec fsyncs) or a failover to a replica that had not
//     received the order loses it. The service notices a voucher gone from
//     Redis, reloads it from MySQL (so nothing is oversold: MySQL's stock
//     counts only persisted orders, and the lost orders' units are sold
//     again, their buyers may buy again) and logs "ACCEPTED ORDERS LOST";
//     nothing in Redis or MySQL records which orders they were.
//   - DurabilityAOF: once Redis has fsynced it to its AOF (appendonly yes,
//     appendfsync always, checked at start by CheckDurability). A SIGKILL
//     of redis-server and a restart on the same files lose nothing
//     accepted.
//   - DurabilityReplica: once MinReplicas replicas have it (WAIT, batched
//     per voucher: replicawait.go). A failover to one of them loses nothing
//     accepted. When they do not confirm within ReplicaTimeout, the buyer
//     gets EUnavailable with a Retry-After: the order may exist; the
//     buyer's retry gets duplicate_order naming it once it is replicated,
//     or a new order if it vanished. A duplicate_order refusal and a lookup
//     of a pending order are answered only once the order they reveal is
//     replicated, too.
//
// A Service notices that Redis lost its data by Redis's epoch
// (Service.WatchEpoch), and on Redis Cluster by each master's own epoch:
// it logs a bound on the orders lost, records the loss (with the master,
// on a cluster) for reconciliation and reloads from MySQL its vouchers
// (on that master), so nothing MySQL holds is sold twice. It notices that Redis went back in time (a
// failover to a replica that lagged, which keeps the epoch) by a voucher's
// level rising, each shard's for a sharded voucher (rewind.go): it logs a
// lower bound, records it, and makes Redis record the buyers MySQL holds
// on that shard. A full Redis (maxmemory, noeviction) loses
// nothing: every script runs whole or not at all (see IsOOM).
//
// Everything else — consumer crashes, MySQL outages, orders MySQL refuses —
// loses nothing in any mode: entries stay in the stream until persisted or
// moved, with their reason, to the dead-letter stream.
package async

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Defaults shared by Service, Consumer and Reconciler. They must agree on
// the prefix and the group.
const (
	DefaultPrefix = "flashsale:"
	DefaultGroup  = "persist"
)

// Sentinel errors.
var (
	// ErrNotLoaded means a voucher's keys are missing from Redis.
	ErrNotLoaded = errors.New("async: voucher not loaded in Redis")
	// ErrMalformed is wrapped when a stream entry cannot be read as an
	// order.
	ErrMalformed = errors.New("async: malformed stream entry")
)

// keyspace names the package's Redis keys under one prefix.
type keyspace struct{ prefix string }

// voucherKeys are one voucher's keys; they share the hash tag {v<id>}.
type voucherKeys struct {
	meta, buyers, orders, dead, failed string
	tries                              string // entry id → attempts to persist it on its own
	sync                               string // written after a batch of orders, before WAIT (replicawait.go)
	moves                              string // sharded: units taken from this shard on their way to another (shard.go)
	applied                            string // sharded: ids of the moves added to this shard
	body                               string // what is inside the hash tag's braces after "v"
}

// voucher returns the keys of a voucher.
func (k keyspace) voucher(id int64) voucherKeys {
	return k.tagged(strconv.FormatInt(id, 10))
}

// epoch returns the key of the Redis epoch (see Service.WatchEpoch) and
// epochs the key of the stream of the losses services noticed.
func (k keyspace) epoch() string  { return k.prefix + "epoch" }
func (k keyspace) epochs() string { return k.prefix + "epochs" }

// retiring returns the key of the sorted set of vouchers whose sale is
// over and drained: voucher id → when its keys may be deleted (ms since
// 1970); see ConsumerConfig.RetireAfter.
func (k keyspace) retiring() string { return k.prefix + "retiring" }

// registry returns the key of the set of vouchers with open streams.
func (k keyspace) registry() string {
	return k.prefix + "vouchers"
}

// micros returns t as the meta hash stores it: µs since 1970.
func micros(t time.Time) string {
	return strconv.FormatInt(t.UnixMicro(), 10)
}

// entryTime returns the time in a stream entry id ("<ms>-<seq>"): when
// Redis accepted the order, by its clock.
func entryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
