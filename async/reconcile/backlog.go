package reconcile

import (
	"context"
	_ "embed" // recount.lua
	"fmt"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
)

var (
	//go:embed recount.lua
	recountLua    string
	recountScript = rueidis.NewLuaScript(layout.EntryLua + recountLua)
)

// recountBacklog compares the backlog in orders that the gate and the
// acks keep (meta's queued) with the orders of the entries the group has
// not acknowledged, and with fix writes the latter: an entry lost from
// the stream, or an order requeued after its entry was acknowledged,
// leaves the kept count off for good (DiffBacklogCount). It runs after
// the requeues.
func (r *Reconciler) recountBacklog(ctx context.Context, vk layout.VoucherKeys, rep *Report, fix bool) error {
	arg := "0"
	if fix {
		arg = "1"
	}
	v, err := recountScript.Exec(ctx, r.client, []string{vk.Orders, vk.Meta}, []string{r.group, arg}).AsIntSlice()
	if err != nil {
		return err
	}
	if len(v) != 2 {
		return fmt.Errorf("recount.lua answered %v", v)
	}
	if v[0] == -2 || v[0] == v[1] {
		return nil
	}
	detail := fmt.Sprintf("the backlog counts %d orders; the entries not acknowledged hold %d", v[0], v[1])
	if v[0] == -1 {
		detail = fmt.Sprintf("the backlog is not counted in orders (keys loaded by an older version); the entries not acknowledged hold %d", v[1])
	}
	rep.add(Diff{Kind: DiffBacklogCount, Detail: detail, Fixed: fix})
	return nil
}
