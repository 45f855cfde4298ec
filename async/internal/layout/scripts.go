package layout

import (
	"context"
	_ "embed" // the Lua scripts
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/luascript"
)

// The scripts more than one role runs. Each says in its header what it
// does, its KEYS and ARGV and what it returns; all KEYS of one call share
// one hash tag.
var (
	//go:embed snapshot.lua
	snapshotLua string
	//go:embed backlog.lua
	backlogLua string
	//go:embed ack.lua
	ackLua string

	snapshotScript = luascript.NewReadOnly(snapshotLua) // ExecMulti: one round trip
	// backlog.lua reads TIME, which miniredis (the embedded Redis) refuses
	// in read-only scripts although Redis allows it.
	backlogScript = luascript.New(backlogLua)
	ackScript     = rueidis.NewLuaScript(ackLua)
)

// Snapshot is a voucher's live figures in Redis, each set of keys read in
// one step by snapshot.lua. While nothing is sold twice and no buyer is
// lost, Stock + Held = InitialStock.
type Snapshot struct {
	Loaded bool // false: not in Redis, the rest is zero
	// Held is the units the buyers' live orders hold, Orders those
	// orders. Held is -1 when it was not counted (a limit above 1,
	// without CountHeld).
	Stock, InitialStock, Held, Orders int
}

// HeldMode says whether ReadSnapshots counts the units every buyer holds.
type HeldMode bool

const (
	// QuickHeld reads in O(1): Held is the buyers (HLEN) with a limit of
	// 1, and -1 above it. For everything periodic or per request.
	QuickHeld HeldMode = false
	// CountHeld sums every buyer's units above a limit of 1: O(buyers),
	// for audits.
	CountHeld HeldMode = true
)

func (m HeldMode) String() string {
	if m == CountHeld {
		return "count"
	}
	return "quick"
}

// ReadSnapshots reads the snapshot of each set of keys, in one round trip.
func ReadSnapshots(ctx context.Context, client rueidis.Client, vks []VoucherKeys, held HeldMode) ([]Snapshot, error) {
	args := []string{held.String()}
	execs := make([]rueidis.LuaExec, len(vks))
	for i, vk := range vks {
		execs[i] = rueidis.LuaExec{Keys: []string{vk.Meta, vk.Buyers}, Args: args}
	}
	out := make([]Snapshot, len(vks))
	for i, res := range snapshotScript.ExecMulti(ctx, client, execs...) {
		v, err := res.AsIntSlice()
		switch {
		case err != nil:
			return nil, err
		case len(v) == 4:
			out[i] = Snapshot{Loaded: true, Stock: int(v[0]), InitialStock: int(v[1]), Held: int(v[2]), Orders: int(v[3])}
		case len(v) != 0:
			return nil, fmt.Errorf("snapshot.lua answered %v", v)
		}
	}
	return out, nil
}

// ReadSnapshot reads a voucher's live figures, summed over its shards when
// it has several: their stock and initial stock each plus the units in
// journals (moving between two shards), and their buyers (Held -1 if a
// shard's was not counted). A sharded voucher is loaded only if every
// shard is.
func ReadSnapshot(ctx context.Context, client rueidis.Client, k Keyspace, voucherID int64, shards int, held HeldMode) (Snapshot, error) {
	vks := k.Shards(voucherID, shards)
	var st []ShardState
	if len(vks) > 1 {
		var err error
		if st, err = ReadShards(ctx, client, vks); err != nil {
			return Snapshot{}, err
		}
	}
	snaps, err := ReadSnapshots(ctx, client, vks, held)
	if err != nil {
		return Snapshot{}, err
	}
	sum := Snapshot{Loaded: true}
	for i, s := range snaps {
		if !s.Loaded {
			return Snapshot{}, nil
		}
		moving := 0
		if st != nil {
			moving = int(JournalUnits(st[i].Moves))
		}
		sum.Stock += s.Stock + moving
		sum.InitialStock += s.InitialStock + moving
		if sum.Held < 0 || s.Held < 0 {
			sum.Held = -1 // not counted
		} else {
			sum.Held += s.Held
		}
		sum.Orders += s.Orders
	}
	return sum, nil
}

// StreamBacklog returns how many orders of a voucher's (shard's) stream
// wait to be persisted, in how many entries the group has not
// acknowledged (not delivered, or pending), and whether the sale is over
// by Redis's clock; 0 for keys not loaded. The entries are exact; the
// orders are counted by the gate and the acks (see backlog.lua).
func StreamBacklog(ctx context.Context, client rueidis.Client, vk VoucherKeys, group string) (orders, entries int64, ended bool, err error) {
	v, err := backlogScript.Exec(ctx, client, []string{vk.Orders, vk.Meta}, []string{group}).AsIntSlice()
	if err != nil {
		return 0, 0, false, err
	}
	if len(v) != 3 {
		return 0, 0, false, fmt.Errorf("backlog.lua answered %v", v)
	}
	return v[2], v[0], v[1] == 1, nil
}

// Backlogs returns StreamBacklog's orders of each set of keys, in one
// round trip.
func Backlogs(ctx context.Context, client rueidis.Client, vks []VoucherKeys, group string) ([]int64, error) {
	execs := make([]rueidis.LuaExec, len(vks))
	for i, vk := range vks {
		execs[i] = rueidis.LuaExec{Keys: []string{vk.Orders, vk.Meta}, Args: []string{group}}
	}
	out := make([]int64, len(vks))
	for i, r := range backlogScript.ExecMulti(ctx, client, execs...) {
		v, err := r.AsIntSlice()
		if err == nil && len(v) != 3 {
			err = fmt.Errorf("backlog.lua answered %v", v)
		}
		if err != nil {
			return nil, fmt.Errorf("backlog of %s: %w", vks[i].Body, err)
		}
		out[i] = v[2]
	}
	return out, nil
}

// Backlog returns how many accepted orders are not persisted yet: the
// backlogs of the registered vouchers' streams, summed. Dead letters are
// not counted. Malformed registry members are skipped.
func Backlog(ctx context.Context, client rueidis.Client, k Keyspace, group string) (int64, error) {
	members, err := client.Do(ctx, client.B().Smembers().Key(k.Registry()).Build()).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("async: backlog: %w", err)
	}
	vks := make([]VoucherKeys, 0, len(members))
	for _, m := range members {
		if _, body, ok := ParseMember(m); ok {
			vks = append(vks, k.Tagged(body))
		}
	}
	if len(vks) == 0 {
		return 0, nil
	}
	backlogs, err := Backlogs(ctx, client, vks, group)
	if err != nil {
		return 0, fmt.Errorf("async: %w", err)
	}
	var total int64
	for _, n := range backlogs {
		total += n
	}
	return total, nil
}

// AckEntry is an entry to acknowledge: its id, how many orders it holds
// (which leave the backlog, meta's queued, if it was pending) and those of
// them persisted now.
type AckEntry struct {
	ID        string
	Orders    int
	Persisted []flashsale.Order
}

// AckResult is what ack.lua did.
type AckResult struct {
	Recorded int64    // buyers it recorded
	Limit    int64    // the voucher's limit per buyer; 0: not loaded
	Redo     []string // lean: entries not pending, whose orders it did not get
}

// Ack runs ack.lua on a voucher's (shard's) keys: it acknowledges entries
// for the group, trims the stream below what every group still needs
// (even with no entries), and records the buyer of each order persisted
// that Redis does not know, taking its units from the stock as the gate
// would have: of the entries that were not pending any more, and others,
// orders persisted whose entry is not acknowledged here (see ack.lua).
// Lean leaves out the entries' orders; pass those of Redo as others at
// once (AckLean does). Only for a voucher whose limit is 1.
func Ack(ctx context.Context, client rueidis.Client, vk VoucherKeys, group string, entries []AckEntry, others []flashsale.Order, lean bool) (AckResult, error) {
	args := make([]string, 0, 2+4*len(entries)+3*len(others))
	args = append(args, group, strconv.Itoa(len(entries)))
	for _, e := range entries {
		k := len(e.Persisted)
		if lean {
			k = 0
		}
		args = append(args, e.ID, strconv.Itoa(e.Orders), strconv.Itoa(len(e.Persisted)), strconv.Itoa(k))
	}
	triple := func(o flashsale.Order) {
		args = append(args, strconv.FormatInt(o.UserID, 10), strconv.FormatInt(o.ID, 10), strconv.Itoa(o.Units()))
	}
	if !lean {
		for _, e := range entries {
			for _, o := range e.Persisted {
				triple(o)
			}
		}
	}
	for _, o := range others {
		triple(o)
	}
	v, err := ackScript.Exec(ctx, client, []string{vk.Orders, vk.Meta, vk.Buyers, vk.Returned, vk.Fence}, args).ToArray()
	if err != nil {
		return AckResult{}, err
	}
	if len(v) < 4 {
		return AckResult{}, fmt.Errorf("ack.lua answered %d values", len(v))
	}
	var res AckResult
	if res.Recorded, err = v[2].AsInt64(); err == nil {
		res.Limit, err = v[3].AsInt64()
	}
	for _, m := range v[4:] {
		if err == nil {
			var id string
			id, err = m.ToString()
			res.Redo = append(res.Redo, id)
		}
	}
	return res, err
}

// AckLean is Ack with lean entries, then, for the entries not pending any
// more, their orders passed as others; its result counts both.
func AckLean(ctx context.Context, client rueidis.Client, vk VoucherKeys, group string, entries []AckEntry, others []flashsale.Order) (AckResult, error) {
	res, err := Ack(ctx, client, vk, group, entries, others, true)
	if err != nil || len(res.Redo) == 0 {
		return res, err
	}
	var redo []flashsale.Order
	for _, id := range res.Redo {
		for _, e := range entries {
			if e.ID == id {
				redo = append(redo, e.Persisted...)
			}
		}
	}
	again, err := Ack(ctx, client, vk, group, nil, redo, false)
	res.Recorded += again.Recorded
	return res, err
}
