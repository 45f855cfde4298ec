package async

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// Registered returns the ids of the vouchers whose streams the consumers
// read (the registry), under prefix (DefaultPrefix when empty): the
// vouchers with orders in flight or a sale not over. Malformed members
// are skipped.
func Registered(ctx context.Context, client rueidis.Client, prefix string) ([]int64, error) {
	keys := keyspace{orDefault(prefix, DefaultPrefix)}
	members, err := client.Do(ctx, client.B().Smembers().Key(keys.registry()).Build()).AsStrSlice()
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

// VoucherBacklog returns how many accepted orders of the voucher (summed
// over its shards) the group
// (DefaultGroup when empty) has not acknowledged yet, under prefix
// (DefaultPrefix when empty); 0 for a voucher that is not loaded.
func VoucherBacklog(ctx context.Context, client rueidis.Client, prefix, group string, voucherID int64) (int64, error) {
	keys := keyspace{orDefault(prefix, DefaultPrefix)}
	n, err := shardCount(ctx, client, keys, voucherID)
	if err != nil {
		return 0, fmt.Errorf("async: backlog of voucher %d: %w", voucherID, err)
	}
	var sum int64
	for _, vk := range keys.shards(voucherID, n) {
		v, err := backlogScript.Exec(ctx, client, []string{vk.orders, vk.meta}, []string{orDefault(group, DefaultGroup)}).AsIntSlice()
		if err != nil {
			return 0, fmt.Errorf("async: backlog of voucher %d: %w", voucherID, err)
		}
		sum += v[0]
	}
	return sum, nil
}
