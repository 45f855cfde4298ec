package async

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
)

// shardsKey returns the key holding a sharded voucher's number of shards,
// in shard 0's slot, for tools that know only the voucher's id (ReadState,
// VoucherBacklog). It is missing for a voucher with one shard.
func (k keyspace) shardsKey(voucherID int64) string {
	return k.prefix + "{v" + strconv.FormatInt(voucherID, 10) + "}:shards"
}

// shardCount returns a voucher's number of shards as Redis records it.
func shardCount(ctx context.Context, client rueidis.Client, keys keyspace, voucherID int64) (int, error) {
	n, err := client.Do(ctx, client.B().Get().Key(keys.shardsKey(voucherID)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 1, nil
	}
	return max(int(n), 1), err
}

// loadShards loads the shards of a voucher listed in missing: free units
// are split evenly among them, and each gets the buyers of orders whose
// home it is (with their units counted in its initial stock), so that
// every shard keeps stock + buyers = initial.
func (s *Service) loadShards(ctx context.Context, v *flashsale.Voucher, shards []voucherKeys, missing []int, free int, orders []flashsale.Order) error {
	cmd := s.client.B().Set().Key(s.keys.shardsKey(v.ID)).Value(strconv.Itoa(len(shards))).Build()
	if err := s.client.Do(ctx, cmd).Error(); err != nil {
		return err
	}
	homed := make([][]flashsale.Order, len(shards))
	for _, o := range orders {
		k := homeShard(o.UserID, len(shards))
		homed[k] = append(homed[k], o)
	}
	free = max(free, 0)
	for i, k := range missing {
		share := free / len(missing)
		if i < free%len(missing) {
			share++
		}
		if err := s.loadKeys(ctx, shards[k], v, homed[k], share, share+len(homed[k])); err != nil {
			return fmt.Errorf("shard %d: %w", k, err)
		}
	}
	return nil
}

// reloadShards loads the shards of a voucher missing from Redis (all of
// them after Redis lost its data, or one node's in a cluster). The units
// they get are MySQL's remaining stock less what the shards still loaded
// hold: their stock, their orders not persisted yet and the units in
// their journals. Redis is read before MySQL, so an order persisted in
// between is counted twice, never missed: the estimate errs towards
// selling less (reconcile reports it), never twice.
func (s *Service) reloadShards(ctx context.Context, v *flashsale.Voucher) error {
	shards := s.keys.shards(v.ID, v.ShardCount())
	st, err := readShards(ctx, s.client, shards)
	if err != nil {
		return unavailable(fmt.Sprintf("reload voucher %d", v.ID), err)
	}
	var missing []int
	held := 0
	for k, sh := range st {
		if !sh.loaded {
			missing = append(missing, k)
			continue
		}
		n, err := backlogScript.Exec(ctx, s.client, []string{shards[k].orders, shards[k].meta}, []string{s.cfg.Group}).AsIntSlice()
		if err != nil {
			return unavailable(fmt.Sprintf("reload voucher %d", v.ID), err)
		}
		held += int(sh.stock + n[0] + journalUnits(sh.moves))
	}
	if len(missing) == 0 {
		return nil
	}
	if !time.Now().Before(v.EndTime) {
		return refusal(flashsale.EEnded, 0)
	}
	row, orders, err := s.db.VoucherSnapshot(ctx, v.ID)
	if err != nil {
		return err
	}
	if err := s.loadShards(ctx, row, shards, missing, row.Remaining-held, orders); err != nil {
		return unavailable(fmt.Sprintf("reload voucher %d", v.ID), err)
	}
	s.logLoaded(v.ID, row.Remaining-held, len(orders))
	return nil
}

// journalUnits sums the units of a journal's moves.
func journalUnits(journal map[string]string) int64 {
	var n int64
	for _, val := range journal {
		if _, units, err := parseMove(val); err == nil {
			n += units
		}
	}
	return n
}

// readShardedSnapshot sums the live figures of a voucher's shards: the
// stock of each plus the units in journals (moving between two shards), the
// initial stocks plus the same units, and the buyers. It is loaded only if
// every shard is.
func readShardedSnapshot(ctx context.Context, client rueidis.Client, shards []voucherKeys) (snapshot, error) {
	execs := make([]rueidis.LuaExec, len(shards))
	for i, vk := range shards {
		execs[i] = rueidis.LuaExec{Keys: []string{vk.meta, vk.buyers}}
	}
	st, err := readShards(ctx, client, shards)
	if err != nil {
		return snapshot{}, err
	}
	sum := snapshot{loaded: true}
	for i, res := range snapshotScript.ExecMulti(ctx, client, execs...) {
		v, err := res.AsIntSlice()
		switch {
		case err != nil:
			return snapshot{}, err
		case len(v) != 3:
			return snapshot{}, nil
		}
		moving := int(journalUnits(st[i].moves))
		sum.stock += int(v[0]) + moving
		sum.initialStock += int(v[1]) + moving
		sum.buyers += int(v[2])
	}
	return sum, nil
}

// voucherSnapshot reads a voucher's live figures, summed over its shards
// when it has several.
func voucherSnapshot(ctx context.Context, client rueidis.Client, keys keyspace, voucherID int64, shards int) (snapshot, error) {
	if shards > 1 {
		return readShardedSnapshot(ctx, client, keys.shards(voucherID, shards))
	}
	return readSnapshot(ctx, client, keys.voucher(voucherID))
}
