package main

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
)

// killHolding SIGKILLs the serve process p (its consumer named consumer)
// at a moment its consumer holds delivered, unacknowledged entries of the
// rig's voucher: it freezes the process (SIGSTOP), looks, and lets it go
// on until it finds some. It returns how many it held. It runs on a
// buyer's goroutine: it reports failures with Error.
func (r *saleRig) killHolding(p *lab.Process, consumer string) int {
	r.t.Helper()
	for range 5000 {
		_ = p.Signal(syscall.SIGSTOP)
		n, err := r.pendingOn(consumer)
		if err != nil {
			r.t.Error(err)
			return 0
		}
		if n > 0 {
			p.Kill()
			return n
		}
		_ = p.Signal(syscall.SIGCONT)
		time.Sleep(2 * time.Millisecond)
	}
	r.t.Errorf("consumer %s never held an entry", consumer)
	return 0
}

// pendingOn returns how many entries of the rig's voucher are delivered
// to consumer and not acknowledged.
func (r *saleRig) pendingOn(consumer string) (int, error) {
	key := r.prefix + "{v" + strconv.FormatInt(r.voucher, 10) + "}:orders"
	res, err := r.redis.Do(context.Background(), r.redis.B().Xpending().Key(key).Group(async.DefaultGroup).
		Start("-").End("+").Count(100000).Consumer(consumer).Build()).ToArray()
	return len(res), err
}

// TestFaultInstanceKilledHoldingOrders: as TestFaultInstanceKilledMidSale,
// with --claim-idle 10m, so only the heartbeat can hand the killed
// consumer's entries over in time: one of two instances is SIGKILLed while
// its consumer holds orders, and restarted with the default consumer name
// (a new one). The other instance notices the dead consumer's heartbeat
// expire and takes its orders over: the drain ends well before ClaimIdle
// (it waits 60 s at most), every accepted order is in MySQL once.
func TestFaultInstanceKilledHoldingOrders(t *testing.T) {
	r := newSaleRig(t, testenv.MySQLURL(t))
	// Transactions of one order: an entry (a gate batch of many orders)
	// takes as many transactions, so the consumers hold some entries most
	// of the time, and b holds some whenever it is looked at.
	flags := []string{"--strategy", "async", "--claim-idle", "10m", "--batch", "1"}
	a := r.serveWith(append(flags, "--consumer-name", "a")...)
	b := r.serveWith(append(flags, "--consumer-name", "b")...)
	r.createVoucher(a.URL)
	live := newTargets(a.URL, b.URL)
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, userRange(1, faultUsers), live.get, faultStock/3, func() {
		live.set(a.URL)
		held := r.killHolding(b, "b")
		killed := time.Now()
		live.set(a.URL, r.serveWith(flags...).URL)
		for n := held; n > 0 && time.Since(killed) < time.Minute; time.Sleep(50 * time.Millisecond) {
			if n, _ = r.pendingOn("b"); n == 0 {
				t.Logf("killed instance b holding %d orders; another consumer took them over %v later", held, time.Since(killed).Round(100*time.Millisecond))
			}
		}
	})
	// Buyers whose request died with b try again, as people do.
	r.buy(s, userRange(1, faultUsers), live.get, faultStock+1, nil)
	r.check(s)
	if n, err := r.pendingOn("b"); n != 0 || err != nil {
		t.Errorf("%d entries still pending on the killed consumer, %v; want all taken over", n, err)
	}
}
