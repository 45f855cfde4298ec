// Package layout is the Redis layout the async pipeline's roles share: the
// gate (package async), the consumer (async/consume) and the reconciler
// (async/reconcile) run apart and meet only here. It owns every key name
// and hash tag, the fields of the streams, the kinds of dead letters, and
// the scripts and reads that more than one role runs; a script only one
// role runs lives with that role.
//
// # Keys
//
// Every voucher's keys share one hash tag, so each script touches one slot
// and the pipeline runs unchanged on Redis Cluster:
//
//	<prefix>{v<id>}:meta    hash: stock (left), initial, begin, end (µs since 1970), given (units given back),
//	                        loaded (µs), limit (units per buyer; absent: 1), window (payment window, µs;
//	                        absent: none), returned (units of closed orders put back on sale), queued
//	                        (orders in the stream not acknowledged: StreamBacklog)
//	<prefix>{v<id>}:buyers  hash: user id → "<units>:<order id>", the units the buyer's live orders hold
//	                        and the latest of them (BuyerValue; a value without ":" is one unit)
//	<prefix>{v<id>}:orders  stream of accepted orders, an entry per gate batch (ParseEntry), consumer
//	                        group DefaultGroup
//	<prefix>{v<id>}:returned hash: order id → units, the closed orders whose units are back in stock
//	<prefix>{v<id>}:keyed   hash: "<user>:<idempotency key>" → order id, the orders placed with a key
//	<prefix>{v<id>}:fence   string: changed by every return that finds the voucher not loaded (expires
//	                        after 10 minutes); a reload writes its snapshot only if it is as before it
//	<prefix>{v<id>}:load:<token>:… one reload's buyers, returned and keyed hashes, on their way in (Staging)
//	<prefix>{v<id>}:dead    dead-letter stream: orders that can never be persisted, with a DeadKind and a reason
//	<prefix>{v<id>}:failed  hash: user id → order id that was dead-lettered
//	<prefix>{v<id>}:tries   hash: "<entry id>/<order id>" → attempts to persist the order on its own, or
//	                        "dead" once dead-lettered; deleted once the entry is acknowledged
//	<prefix>{v<id>}:sync    durability replica: written before each WAIT, expires
//	<prefix>{v<id>}:moves   sharded: hash of units in transfer to another shard (shard.go)
//	<prefix>{v<id>}:applied sharded: set of the transfers added to this shard
//	<prefix>{v<id>}:shards  sharded: the number of shards, in shard 0's slot
//	<prefix>{v<id>.<n>}:…   the same keys for shard k ≥ 1 of a sharded voucher (shard.go)
//	<prefix>{<tag>}:p<bucket> order pointers (gate.lua): hash order id → "<voucher>:<user>:<entry id>" of the ids of
//	                        16 seconds of one slot, in that slot (the tag is hashslot.Tag of the slot the
//	                        id carries: its shard's), expires a day after its last write; Pointer
//	<prefix>vouchers        set: the registry, members "<id>" or "<id>.<n>", whose streams consumers read
//	<prefix>retiring        sorted set: finished vouchers → when their keys may be deleted (ms)
//	<prefix>epoch           random id written when Redis is found empty
//	<prefix>{e<n>}:epoch    on Redis Cluster, the same for the master that owns the slot of {e<n>}
//	<prefix>epochs          stream: the data losses services noticed (the FieldLoss… fields)
//	<prefix>returns         Pub/Sub channel: the ids of vouchers whose units came back
//	<prefix>owner           the database this prefix belongs to: JSON, written once (SET NX)
//	<prefix>alive:<group>:<consumer>  a consumer's heartbeat, expires unless renewed
//
// A new key gets its name here, under the voucher's hash tag when a script
// touches it with the voucher's other keys.
package layout

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/hashslot"
)

// Defaults every role uses: they must agree on the prefix and the group.
const (
	DefaultPrefix = "flashsale:"
	DefaultGroup  = "persist"
)

// Keyspace names the pipeline's keys under one prefix.
type Keyspace struct{ prefix string }

// New returns the keyspace under prefix, DefaultPrefix when it is empty.
func New(prefix string) Keyspace { return Keyspace{cmp.Or(prefix, DefaultPrefix)} }

// VoucherKeys are the keys of one voucher, or of one shard of a sharded
// voucher; they share the hash tag {v<Body>}.
type VoucherKeys struct {
	Meta, Buyers, Orders, Dead, Failed string
	Tries                              string // entry id → attempts to persist it on its own
	Sync                               string // written after a batch of orders, before WAIT
	Moves                              string // sharded: units taken from this shard on their way to another
	Applied                            string // sharded: ids of the moves added to this shard
	Returned                           string // order id → units put back in stock
	Keyed                              string // "<user>:<idempotency key>" → order id
	Fence                              string // changed by a return while the keys are not loaded
	// Body is what the hash tag's braces hold after "v": the voucher's id,
	// or a shard's "<id>.<n>"; it is also the voucher's registry member.
	Body string
	// Slot is the Redis Cluster slot of every key above.
	Slot int
}

// Gate returns the keys gate.lua takes: meta, buyers, orders, keyed.
func (vk VoucherKeys) Gate() []string { return []string{vk.Meta, vk.Buyers, vk.Orders, vk.Keyed} }

// Voucher returns the keys of a voucher (of shard 0, when it has shards).
func (k Keyspace) Voucher(id int64) VoucherKeys {
	return k.Tagged(strconv.FormatInt(id, 10))
}

// Tagged returns the keys under the hash tag {v<body>}: a voucher's when
// body is its id, a shard's when body is a shard tag.
func (k Keyspace) Tagged(body string) VoucherKeys {
	tag := k.prefix + "{v" + body + "}:"
	return VoucherKeys{
		Meta:     tag + "meta",
		Buyers:   tag + "buyers",
		Orders:   tag + "orders",
		Dead:     tag + "dead",
		Failed:   tag + "failed",
		Tries:    tag + "tries",
		Sync:     tag + "sync",
		Moves:    tag + "moves",
		Applied:  tag + "applied",
		Returned: tag + "returned",
		Keyed:    tag + "keyed",
		Fence:    tag + "fence",
		Body:     body,
		Slot:     hashslot.Of(tag),
	}
}

// Staging returns the keys one reload (named by token) writes its
// snapshot's buyers, returned and keyed hashes to, in the voucher's slot,
// before load.lua takes them in or drops them.
func (vk VoucherKeys) Staging(token string) (buyers, returned, keyed string) {
	tag := strings.TrimSuffix(vk.Meta, "meta") + "load:" + token + ":"
	return tag + "buyers", tag + "returned", tag + "keyed"
}

// Registry returns the key of the set of vouchers whose streams the
// consumers read: a member per voucher, or per shard ("<id>.<n>").
func (k Keyspace) Registry() string { return k.prefix + "vouchers" }

// ReturnsChannel returns the Pub/Sub channel on which returns announce a
// voucher whose units came back: every gate then forgets that it was sold
// out (a message names the voucher's id).
func (k Keyspace) ReturnsChannel() string { return k.prefix + "returns" }

// Retiring returns the key of the sorted set of vouchers whose sale is
// over and drained: voucher id → when its keys may be deleted (ms since
// 1970).
func (k Keyspace) Retiring() string { return k.prefix + "retiring" }

// Epoch returns the key of Redis's epoch, and Epochs the key of the
// stream of the losses services noticed.
func (k Keyspace) Epoch() string  { return k.prefix + "epoch" }
func (k Keyspace) Epochs() string { return k.prefix + "epochs" }

// Owner returns the key of the claim on the prefix: which system of
// record (database) the keys under it belong to.
func (k Keyspace) Owner() string { return k.prefix + "owner" }

// Heartbeat returns the key of a consumer's heartbeat in a group: it
// exists while the consumer lives.
func (k Keyspace) Heartbeat(group, consumer string) string {
	return k.prefix + "alive:" + group + ":" + consumer
}

// NodeEpoch returns the key of the n-th per-master epoch of Redis Cluster;
// the gate picks, per master, the first n whose slot that master owns.
func (k Keyspace) NodeEpoch(n int) string { return k.prefix + "{e" + strconv.Itoa(n) + "}:epoch" }

// PointerBucketShift drops the low 4 bits of an order id's second: a
// bucket of order pointers spans 16 seconds of ids (of one slot).
const PointerBucketShift = 4

// Pointer returns the key of the bucket holding an order's pointer and the
// pointer's field in it. The bucket follows from the id alone, so a lookup
// by order id, which does not know the voucher, touches one key: for an id
// that carries a slot (idgen.Slot), "{<tag of the slot>}:p<bucket>", in
// that slot, with the keys of the shard the order was taken on. A plain id
// (idgen.New, versions before issue 34) has none: key is "".
func (k Keyspace) Pointer(orderID int64) (key, field string) {
	field = strconv.FormatInt(orderID, 10)
	slot, ok := idgen.Slot(orderID)
	if !ok {
		return "", field
	}
	bucket := strconv.FormatInt(idgen.Second(orderID)>>PointerBucketShift, 10)
	return k.prefix + "{" + hashslot.Tag(slot) + "}:p" + bucket, field
}

// Micros returns t as the meta hash stores times: µs since 1970.
func Micros(t time.Time) string {
	return strconv.FormatInt(t.UnixMicro(), 10)
}

// EntryTime returns the time in a stream entry id ("<ms>-<seq>"): when
// Redis accepted the order, by its clock.
func EntryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// InstanceName returns a new name for this process as it appears in
// Redis, hostname-pid-random: a consumer's default name in its group, and
// who noticed a loss in the epochs stream.
func InstanceName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
