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
// The Redis layout the gate shares with async/consume and async/reconcile,
// every key and stream field, is in async/internal/layout. Every voucher's
// keys share one hash tag, so each script touches one slot and the package
// runs unchanged on Redis Cluster.
//
// # The pipeline
//
// Service.PlaceOrder takes an order id from the ID generator, then runs
// gate.lua: sale window by Redis's clock, stock, one order per user; on
// success it takes one unit of stock, records the buyer and appends the
// order to the voucher's stream, all in one script. It then writes the
// order pointer (batched with the other orders accepted meanwhile:
// pointer.go) and answers "pending". A consume.Consumer reads each
// voucher's stream with a consumer group, persists batches (one
// transaction, idempotent) and acknowledges them, trimming what every group
// has acknowledged. A reconcile.Reconciler compares Redis with MySQL and
// repairs what is safe to repair. Neither calls the gate: the three meet
// only in Redis.
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
// consume.Config.RetireAfter later; MySQL answers for it then.
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

	"github.com/flashsale/flashsale/async/internal/layout"
)

// Defaults shared by the Service, the consumer and the reconciler. They
// must agree on the prefix and the group.
const (
	DefaultPrefix = layout.DefaultPrefix
	DefaultGroup  = layout.DefaultGroup
)

// ErrNotLoaded means a voucher's keys are missing from Redis.
var ErrNotLoaded = errors.New("async: voucher not loaded in Redis")
