package idgen

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

//go:embed alloc.lua
var allocSource string

// allocScript allocates one range. It is not marked retryable: fetch
// already retries with a backoff, and its errors must reach the caller.
var allocScript = rueidis.NewLuaScript(allocSource)

// Statuses returned by alloc.lua.
const (
	statusAllocated = 0
	statusRestarted = 1
	statusMissing   = 2
)

// Timeouts of one fetch step.
const (
	callTimeout = 3 * time.Second
	// maxClockWait caps one sleep for Redis's clock, so a clock that went
	// far back is polled rather than trusted.
	maxClockWait = time.Second
)

// allocation is the reply of alloc.lua.
type allocation struct {
	status       int64
	now, ts      int64 // seconds since the epoch
	start, count int64 // the range of sequence numbers in second ts
	wait         time.Duration
}

// allocate runs alloc.lua once.
func (g *Generator) allocate(ctx context.Context, floor position, restart bool) (allocation, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	restartArg := "0"
	if restart {
		restartArg = "1"
	}
	g.roundTrips.Add(1)
	v, err := allocScript.Exec(ctx, g.client, []string{g.key}, []string{
		strconv.FormatInt(g.epoch.Unix(), 10),
		strconv.FormatInt(g.batch, 10),
		strconv.FormatInt(floor.ts, 10),
		strconv.FormatInt(floor.seq, 10),
		restartArg,
		strconv.FormatInt(g.seqMax, 10),
	}).AsIntSlice()
	if err != nil {
		return allocation{}, fmt.Errorf("%w: allocating a range: %w", ErrUnavailable, err)
	}
	if len(v) != 6 {
		return allocation{}, fmt.Errorf("%w: allocating a range: unexpected reply %v", ErrUnavailable, v)
	}
	return allocation{
		status: v[0], now: v[1], ts: v[2], start: v[3], count: v[4],
		wait: time.Duration(v[5]) * time.Microsecond,
	}, nil
}

// fetch allocates the next range, which starts at or after floor. It looks
// the floor up when the hash is missing and waits for Redis's clock when
// the script says so.
func (g *Generator) fetch(ctx context.Context, floor position) (span, error) {
	restart := g.floorFn == nil // nothing to look up first
	own := floor                // where this process's ranges ended
	// firstUse: the floor function knows no ID and this generator handed
	// out none: a missing hash is a new install, not a lost one.
	firstUse := false
	for {
		a, err := g.allocate(ctx, floor, restart)
		if err != nil {
			return span{}, err
		}
		switch a.status {
		case statusMissing:
			var known bool
			if floor, known, err = g.lookUpFloor(ctx, floor); err != nil {
				return span{}, err
			}
			firstUse = !known && floor == (position{})
			restart = true
			continue
		case statusRestarted:
			g.resets.Add(1)
			g.logRestart(firstUse, a, floor, own)
		}
		if a.now < 0 || a.ts > MaxSeconds {
			return span{}, fmt.Errorf("%w: second %d since %s", ErrTimeRange, a.now, g.epoch.Format(time.RFC3339))
		}
		if a.count > 0 {
			return g.span(a.ts, a.start, a.count), nil
		}
		if a.wait > maxClockWait {
			g.log.Warn("idgen: Redis's clock is behind the hash (it went back); waiting for it",
				"key", g.key, "behind", a.wait)
		}
		if err := sleep(ctx, min(a.wait, maxClockWait)); err != nil {
			return span{}, fmt.Errorf("%w: waiting for Redis's clock: %w", ErrUnavailable, err)
		}
	}
}

// logRestart tells of a hash created anew: on first use that is normal;
// otherwise Redis lost it (a restart without persistence, an eviction).
// A slotted Generator's first use of its slot is normal too, and only the
// process's own earlier ranges (own) tell a loss from it.
func (g *Generator) logRestart(firstUse bool, a allocation, floor, own position) {
	if g.slotted && !firstUse && own == (position{}) {
		g.log.Info("idgen: created the Redis hash of a slot (its first use)", "key", g.key, "second", a.ts)
		return
	}
	if firstUse {
		g.log.Info("idgen: created the Redis hash (first use: no ID handed out yet)", "key", g.key, "second", a.ts)
		return
	}
	g.log.Warn("idgen: the Redis hash was missing (lost); restarted past the clock and the floor",
		"key", g.key, "second", a.ts, "floor_second", floor.ts)
}

// lookUpFloor returns the later of floor and the position past the ID the
// floor function returns, and whether that function knew any ID.
func (g *Generator) lookUpFloor(ctx context.Context, floor position) (position, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	id, err := g.floorFn(ctx)
	if err != nil {
		return floor, false, fmt.Errorf("%w: looking up the floor: %w", ErrUnavailable, err)
	}
	if p := g.past(id); id > 0 && p.after(floor) {
		return p, true, nil
	}
	return floor, id > 0, nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
