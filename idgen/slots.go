package idgen

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/hashslot"
)

var _ flashsale.IDGenerator = (*Slots)(nil)

// Slots hands out slotted IDs for any Redis Cluster slot: NextIDIn(slot)
// takes from that slot's own Generator (WithSlot), made on first use,
// whose hash lives in the slot itself. So a sale whose keys are in a few
// slots allocates its IDs on those slots' masters, with no one hot key,
// and an ID tells which slot its order's other keys are in. NextID takes
// from the slot of name. Safe for concurrent use.
type Slots struct {
	client rueidis.Client
	name   string
	opts   []Option
	home   int
	epoch  time.Time

	gens   sync.Map   // slot → *Generator
	mu     sync.Mutex // making a Generator, closing
	closed bool
}

// NewSlots returns Slots of name, each slot's Generator made with opts
// (WithSlot is added). It does not talk to Redis until the first ID.
func NewSlots(c rueidis.Client, name string, opts ...Option) *Slots {
	probe := New(nil, name, opts...) // only to read the options
	probe.Close()
	return &Slots{client: c, name: name, opts: opts, home: hashslot.Of(name), epoch: probe.epoch}
}

// NextID returns the next ID of the slot of the Slots' name.
func (s *Slots) NextID(ctx context.Context) (int64, error) { return s.NextIDIn(ctx, s.home) }

// NextIDIn returns the next ID of slot (taken modulo 16384), as
// Generator.NextID does.
func (s *Slots) NextIDIn(ctx context.Context, slot int) (int64, error) {
	slot &= slotMask
	g, ok := s.gens.Load(slot)
	if !ok {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		if g, ok = s.gens.Load(slot); !ok { // made meanwhile?
			g = New(s.client, s.name, append(append([]Option(nil), s.opts...), WithSlot(slot))...)
			s.gens.Store(slot, g)
		}
		s.mu.Unlock()
	}
	return g.(*Generator).NextID(ctx)
}

// Close closes every slot's Generator; NextIDIn returns ErrClosed
// afterwards.
func (s *Slots) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.gens.Range(func(_, g any) bool { g.(*Generator).Close(); return true })
}

// Stats returns the sum of the slots' Generators' counters.
func (s *Slots) Stats() Stats {
	var sum Stats
	s.gens.Range(func(_, g any) bool {
		st := g.(*Generator).Stats()
		sum.IDs += st.IDs
		sum.RoundTrips += st.RoundTrips
		sum.Resets += st.Resets
		sum.Failures += st.Failures
		sum.Waits += st.Waits
		return true
	})
	return sum
}

// Epoch returns the epoch the IDs count their seconds from.
func (s *Slots) Epoch() time.Time { return s.epoch }
