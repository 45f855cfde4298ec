package consume

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// An entry holds a gate batch, and is acknowledged only once each of its
// orders is persisted or dead-lettered; until then it may come back (a
// consumer died, or a later chunk of it failed). The tries hash remembers,
// per order ("<entry>/<order>"), what must survive that: the attempts to
// persist it on its own (persistAlone), or "dead" once dead.lua
// dead-lettered it, so it is passed over, neither tried again from one
// nor persisted after its dead letter. The worker deletes an entry's
// fields once handle has acknowledged it; fields left by a consumer that
// died in between are harmless (entry ids are never reused) and go with
// the voucher's keys.

// markField names an order of an entry in the tries hash.
func markField(entry, order string) string { return entry + "/" + order }

// deadMarked returns the fields of the orders of entries, delivered
// before, that were dead-lettered.
func (w *worker) deadMarked(ctx context.Context, entries []rueidis.XRangeEntry) (map[string]bool, error) {
	var fields []string
	for _, e := range entries {
		for _, id := range layout.EntryOrderIDs(e.FieldValues) {
			fields = append(fields, markField(e.ID, id))
		}
	}
	if len(fields) == 0 {
		return nil, nil
	}
	vals, err := w.c.client.Do(ctx, w.c.client.B().Hmget().Key(w.keys.Tries).Field(fields...).Build()).ToArray()
	if err != nil {
		return nil, err
	}
	dead := map[string]bool{}
	for i, v := range vals {
		if s, err := v.ToString(); err == nil && s == "dead" {
			dead[fields[i]] = true
		}
	}
	return dead, nil
}

// clearMarks deletes the tries fields handle wrote or passed over, once
// their entries are acknowledged.
func (w *worker) clearMarks(ctx context.Context) error {
	if len(w.marks) == 0 {
		return nil
	}
	err := w.c.client.Do(ctx, w.c.client.B().Hdel().Key(w.keys.Tries).Field(w.marks...).Build()).Error()
	w.marks = nil
	return err
}
