package layout

import (
	"context"
	_ "embed" // unacked.lua
	"strconv"

	"github.com/redis/rueidis"
)

var (
	//go:embed unacked.lua
	unackedLua    string
	unackedScript = rueidis.NewLuaScriptReadOnly(EntryLua + unackedLua)

	// EntryLua is entry.lua: the scripts that read orders stream entries
	// start with it.
	//
	//go:embed entry.lua
	EntryLua string
)

// Unacked returns the orders of a voucher's (shard's) stream that the
// consumer group has not acknowledged — not delivered yet, or delivered
// and pending — as order id → units: what reconcile counts in flight, and
// what a reload of a sharded voucher's other shards counts as held.
func Unacked(ctx context.Context, client rueidis.Client, vk VoucherKeys, group string) (map[int64]int64, error) {
	vals, err := unackedScript.Exec(ctx, client, []string{vk.Orders}, []string{group}).ToArray()
	if err != nil {
		return nil, err
	}
	out := make(map[int64]int64, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		s, _ := vals[i].ToString()
		q, _ := vals[i+1].AsInt64()
		if id, err := strconv.ParseInt(s, 10, 64); err == nil {
			out[id] = q
		}
	}
	return out, nil
}
