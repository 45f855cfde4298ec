package outbox

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// Audit checks what one consumer of a sink received: each event's first
// delivery must come after the first delivery of every earlier event of
// its order (or voucher), a delivery of an event seen before is a
// duplicate, and every event the outbox holds must arrive (Missing). It
// is safe for concurrent use.
type Audit struct {
	mu         sync.Mutex
	seen       map[string]bool  // event ids
	last       map[string]int64 // order or voucher key → highest sequence seen
	latencies  []time.Duration
	duplicates int
	outOfOrder []string
}

// NewAudit returns an empty audit.
func NewAudit() *Audit {
	return &Audit{seen: map[string]bool{}, last: map[string]int64{}}
}

// Receive records one delivered event body, received at at.
func (a *Audit) Receive(body []byte, at time.Time) error {
	var e flashsale.Event
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Errorf("outbox: audit: %w", err)
	}
	key := dataKey(e.Data)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[e.ID] {
		a.duplicates++
		return nil
	}
	a.seen[e.ID] = true
	a.latencies = append(a.latencies, at.Sub(e.OccurredAt))
	if e.Sequence < a.last[key] {
		a.outOfOrder = append(a.outOfOrder, fmt.Sprintf("%s (%s) after sequence %d of %s", e.ID, e.Type, a.last[key], key))
	}
	a.last[key] = max(a.last[key], e.Sequence)
	return nil
}

// dataKey is the key an event's data orders it by: "o<order id>", or
// "v<voucher id>" for a voucher event.
func dataKey(data []byte) string {
	if id := flashsale.EventOrder(data); id != 0 {
		return "o" + strconv.FormatInt(id, 10)
	}
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(data, &v)
	return "v" + v.ID
}

// Missing returns the ids of the events in want not received.
func (a *Audit) Missing(want []store.OutboxEvent) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var missing []string
	for _, e := range want {
		if !a.seen[e.ID] {
			missing = append(missing, e.ID)
		}
	}
	return missing
}

// AuditReport is what an audit found.
type AuditReport struct {
	Received, Duplicates int
	// OutOfOrder lists the events first delivered after a later event of
	// their order.
	OutOfOrder []string
	// P50 and P99 are the latencies from an event's occurred_at (its
	// commit, within a millisecond) to its first delivery.
	P50, P99 time.Duration
}

// Report returns what the audit found so far.
func (a *Audit) Report() AuditReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := AuditReport{Received: len(a.seen), Duplicates: a.duplicates, OutOfOrder: slices.Clone(a.outOfOrder)}
	l := slices.Sorted(slices.Values(a.latencies))
	if len(l) > 0 {
		r.P50, r.P99 = l[len(l)*50/100], l[min(len(l)*99/100, len(l)-1)]
	}
	return r
}
