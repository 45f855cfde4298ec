package async

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// Reads of the pipeline's Redis state for tools that audit it from outside
// (the load lab, the metrics sampler). Each takes the prefix the pipeline
// runs under (DefaultPrefix when empty).

// State is what Redis holds for one voucher of the pipeline, summed over
// its shards (the units moving between them counted in Stock and
// InitialStock): with nothing sold twice and no buyer lost, Stock + Held
// = InitialStock at every instant.
type State struct {
	// Loaded is false when the voucher is not in Redis; the rest is zero.
	Loaded              bool
	Stock, InitialStock int
	// Held is the units the buyers' live orders hold (the buyers, while
	// every order is of one unit): from ReadState, -1 with a limit per
	// buyer above 1 (see AuditState). DeadLetters counts the orders that
	// can never be persisted.
	Held, DeadLetters int
}

// ReadState reads a voucher's State from Redis, each shard in one
// consistent step, in a time that does not grow with the voucher's
// buyers or backlog: for periodic readers (the metrics sampler, the
// waiting room's admission). Held is counted with a limit of 1 only
// (HLEN), and -1 above it.
func ReadState(ctx context.Context, client rueidis.Client, prefix string, voucherID int64) (State, error) {
	return readState(ctx, client, prefix, voucherID, layout.QuickHeld)
}

// AuditState is ReadState with Held counted whatever the limit: it reads
// every buyer of a voucher whose limit is above 1, so it is for audits
// (the load lab's), never for anything periodic.
func AuditState(ctx context.Context, client rueidis.Client, prefix string, voucherID int64) (State, error) {
	return readState(ctx, client, prefix, voucherID, layout.CountHeld)
}

// readState is ReadState, counting Held as held says.
func readState(ctx context.Context, client rueidis.Client, prefix string, voucherID int64, held layout.HeldMode) (State, error) {
	keys := layout.New(prefix)
	shards, err := layout.ShardCount(ctx, client, keys, voucherID)
	if err != nil {
		return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
	}
	snap, err := layout.ReadSnapshot(ctx, client, keys, voucherID, shards, held)
	if err != nil {
		return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
	}
	if !snap.Loaded {
		return State{}, nil
	}
	var dead int64
	for _, vk := range keys.Shards(voucherID, shards) {
		n, err := client.Do(ctx, client.B().Xlen().Key(vk.Dead).Build()).AsInt64()
		if err != nil {
			return State{}, fmt.Errorf("async: state of voucher %d: %w", voucherID, err)
		}
		dead += n
	}
	return State{Loaded: true, Stock: snap.Stock, InitialStock: snap.InitialStock, Held: snap.Held, DeadLetters: int(dead)}, nil
}

// Registered returns the ids of the vouchers whose streams the consumers
// read (the registry): the vouchers with orders in flight or a sale not
// over. Shards' members and malformed members are skipped.
func Registered(ctx context.Context, client rueidis.Client, prefix string) ([]int64, error) {
	members, err := client.Do(ctx, client.B().Smembers().Key(layout.New(prefix).Registry()).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("async: registry: %w", err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// VoucherBacklog returns how many accepted orders of the voucher, summed
// over its shards, the group (DefaultGroup when empty) has not
// acknowledged yet; 0 for a voucher that is not loaded.
func VoucherBacklog(ctx context.Context, client rueidis.Client, prefix, group string, voucherID int64) (int64, error) {
	keys := layout.New(prefix)
	n, err := layout.ShardCount(ctx, client, keys, voucherID)
	if err != nil {
		return 0, fmt.Errorf("async: backlog of voucher %d: %w", voucherID, err)
	}
	var sum int64
	for _, vk := range keys.Shards(voucherID, n) {
		b, _, _, err := layout.StreamBacklog(ctx, client, vk, cmp.Or(group, DefaultGroup))
		if err != nil {
			return 0, fmt.Errorf("async: backlog of voucher %d: %w", voucherID, err)
		}
		sum += b
	}
	return sum, nil
}

// Consumers returns the names of the consumers in the group (DefaultGroup
// when empty) of the voucher's streams, over its shards, sorted: every
// process that has read its orders since, and a "released-by-<name>" for
// each that handed orders back because its database lacks the voucher.
// A voucher not loaded has none.
func Consumers(ctx context.Context, client rueidis.Client, prefix, group string, voucherID int64) ([]string, error) {
	keys := layout.New(prefix)
	n, err := layout.ShardCount(ctx, client, keys, voucherID)
	if err != nil {
		return nil, fmt.Errorf("async: consumers of voucher %d: %w", voucherID, err)
	}
	var names []string
	for _, vk := range keys.Shards(voucherID, n) {
		infos, err := client.Do(ctx, client.B().XinfoConsumers().Key(vk.Orders).Group(cmp.Or(group, DefaultGroup)).Build()).ToArray()
		if re, ok := rueidis.IsRedisErr(err); ok && (strings.Contains(re.Error(), "no such key") || strings.HasPrefix(re.Error(), "NOGROUP")) {
			continue // not loaded
		}
		if err != nil {
			return nil, fmt.Errorf("async: consumers of voucher %d: %w", voucherID, err)
		}
		for _, info := range infos {
			m, err := info.AsMap()
			if err != nil {
				return nil, fmt.Errorf("async: consumers of voucher %d: %w", voucherID, err)
			}
			field := m["name"]
			name, err := field.ToString()
			if err != nil {
				return nil, fmt.Errorf("async: consumers of voucher %d: %w", voucherID, err)
			}
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
