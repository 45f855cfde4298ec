package lab

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashsale/flashsale"
)

// A sale with a payment window (Sale.PaymentWindow): its buyers pay,
// cancel or abandon their orders (buyers.go), the buyers without an order
// keep trying in waves so that returned units are resold, and the audit
// waits until every order is settled to say what became of them.

// Lifecycle is what became of the orders of a sale with a payment window:
// what the lab's buyers did, and what MySQL holds once every order is
// settled (none awaits payment, no return is pending). It is a run's
// "lifecycle" in flashsale bench --json.
type Lifecycle struct {
	// What the buyers did, from the answers: payments answered 200 and
	// their units, cancels answered 200, payments and cancels refused as
	// late (order_closed: past pay_by), orders left to expire, other
	// refusals by "pay CODE" or "cancel CODE", and payments and cancels
	// that got no usable answer.
	Payments     int            `json:"payments"`
	PaymentUnits int            `json:"payment_units"`
	Cancels      int            `json:"cancels"`
	Late         int            `json:"late"`
	Abandoned    int            `json:"abandoned"`
	Refused      map[string]int `json:"refused"`
	Errors       int            `json:"errors"`
	// Ended says why the buyers stopped trying: EndedPaid, EndedSale or
	// EndedBuyers; Waves counts their waves after the first.
	Ended string `json:"ended"`
	Waves int    `json:"waves"`
	// From MySQL, settled: the units of the paid orders; the orders
	// cancelled and expired, and the units they returned; Resold, the
	// units sold more than once: the units sold beyond the stock, live
	// units + returned units − stock (units are alike: any sale past the
	// stock's was of a unit returned); Unpaid, stock − paid units.
	PaidUnits     int `json:"paid_units"`
	Cancelled     int `json:"cancelled"`
	Expired       int `json:"expired"`
	ReturnedUnits int `json:"returned_units"`
	Resold        int `json:"resold_units"`
	Unpaid        int `json:"unpaid_units"`
	// PaidAfterClose counts the closed (cancelled or expired) orders that
	// carry a payment in MySQL, and those the buyers were told were paid
	// that ended closed all the same. A correct sale has none.
	PaidAfterClose int `json:"paid_after_close"`
}

// Why the buyers of a sale with a payment window stopped trying.
const (
	EndedPaid   = "every unit paid"
	EndedSale   = "the sale ended"
	EndedBuyers = "no buyer left without an order"
)

// checkLifecycle returns the Lifecycle of e, which has Buyers.
func checkLifecycle(e Evidence) *Lifecycle {
	lc := *e.Buyers
	lc.PaidUnits = e.PaidUnits
	lc.Cancelled, lc.Expired, lc.ReturnedUnits = e.DB.Cancelled, e.DB.Expired, e.DB.ReturnedUnits
	lc.Resold = max(0, e.DB.Units+e.DB.ReturnedUnits-e.DB.Stock)
	lc.Unpaid = max(0, e.DB.Stock-e.PaidUnits)
	lc.PaidAfterClose = e.DB.PaidAfterClose
	paid := set(e.PaidIDs)
	for _, o := range e.Closed {
		closed := o.Status == flashsale.StatusCancelled || o.Status == flashsale.StatusExpired
		if closed && paid[o.ID] && o.PaymentID == "" { // with one, MySQL counted it
			lc.PaidAfterClose++
		}
	}
	return &lc
}

// problems describes what is wrong with the lifecycle of a sale whose
// live orders hold units.
func (lc *Lifecycle) problems(units int) []string {
	var p []string
	if lc.PaidAfterClose > 0 {
		p = append(p, fmt.Sprintf("%d orders paid after they closed (cancelled or expired)", lc.PaidAfterClose))
	}
	if lc.PaidUnits != lc.PaymentUnits {
		p = append(p, fmt.Sprintf("the buyers were told %d units were paid; MySQL holds %d paid units", lc.PaymentUnits, lc.PaidUnits))
	}
	if lc.Ended == EndedPaid && units != lc.PaidUnits {
		p = append(p, fmt.Sprintf("every unit was paid, yet %d units are sold and %d paid", units, lc.PaidUnits))
	}
	if len(lc.Refused) > 0 {
		p = append(p, "payments or cancels refused: "+codes(lc.Refused))
	}
	if lc.Errors > 0 {
		p = append(p, fmt.Sprintf("%d payments or cancels got no usable answer", lc.Errors))
	}
	return p
}

// story says in one sentence what became of the sale's orders.
func (lc *Lifecycle) story(r *Row) string {
	s := fmt.Sprintf("%s: %d of %d units paid", r.Strategy, lc.PaidUnits, r.Stock)
	if lc.Unpaid > 0 {
		s += fmt.Sprintf(" (%s: %d unpaid)", lc.Ended, lc.Unpaid)
	}
	return s + fmt.Sprintf(" in %.1f s; orders cancelled %d, expired %d: %d units returned, %d resold; payments or cancels too late %d; paid after close %d.",
		r.ElapsedMs/1000, lc.Cancelled, lc.Expired, lc.ReturnedUnits, lc.Resold, lc.Late, lc.PaidAfterClose)
}

// resale returns the Load.More of a sale with a payment window: after a
// pause, a wave of one click of every buyer who has had no order accepted
// yet, with a fresh quantity, in a fresh order; none once every unit is
// paid, the sale ended at deadline, or every buyer has had an order.
func (s *Sale) resale(b *buyers, deadline time.Time) func(context.Context) []Shot {
	pause := min(max(s.PaymentWindow/10, 100*time.Millisecond), time.Second)
	waves := 0
	return func(ctx context.Context) []Shot {
		until := time.Now().Add(pause)
		if deadline.Before(until) {
			until = deadline
		}
		if err := sleepUntil(ctx, until); err != nil {
			return nil
		}
		market := b.market(s.Users)
		switch {
		case b.paidUnits() >= s.Stock:
			b.stop(EndedPaid, waves)
			return nil
		case !time.Now().Before(deadline):
			b.stop(EndedSale, waves)
			return nil
		case len(market) == 0:
			b.stop(EndedBuyers, waves)
			return nil
		}
		waves++
		seed := s.Seed + uint64(waves)
		rng := rand.New(rand.NewPCG(seed, uint64(len(market))))
		rng.Shuffle(len(market), func(i, j int) { market[i], market[j] = market[j], market[i] })
		shots := make([]Shot, len(market))
		for i, u := range market {
			shots[i] = Shot{User: u, Clicks: 1}
		}
		Quantities(shots, s.QuantityMax, seed)
		return shots
	}
}

// WriteLifecycleTable writes, for the rows of sales with a payment window,
// what became of their orders: the units paid of the stock, the orders
// cancelled and expired, the units returned and resold, the payments and
// cancels refused as late, the orders paid after close, the units left
// unpaid and how long the sale went on. It writes nothing when no row has
// a Lifecycle.
func WriteLifecycleTable(w io.Writer, rows []Row) error {
	width := strategyWidth(rows)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	heading := false
	for _, r := range rows {
		lc := r.Lifecycle
		if lc == nil {
			continue
		}
		if !heading {
			fmt.Fprintf(tw, "%-*s\tpaid\t\t\t\treturned\tresold\t\tpaid after\t\tsale\t\n", width, "")
			fmt.Fprintf(tw, "%-*s\tunits\tstock\tcancelled\texpired\tunits\tunits\tlate\tclose\tunpaid\ts\t\n", width, "strategy")
			heading = true
		}
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t\n", width, r.Strategy, lc.PaidUnits, r.Stock,
			lc.Cancelled, lc.Expired, lc.ReturnedUnits, lc.Resold, lc.Late, lc.PaidAfterClose, lc.Unpaid, r.ElapsedMs/1000)
	}
	return tw.Flush()
}

// lifecycleVerdicts are the sentences on what became of the orders of the
// rows with a Lifecycle.
func lifecycleVerdicts(rows []Row) []string {
	var out []string
	for i := range rows {
		if lc := rows[i].Lifecycle; lc != nil {
			out = append(out, lc.story(&rows[i]))
		}
	}
	return out
}

// describeRules says what a sale's purchase rules and payment window are:
// "1–3 units an order, limit 3 per buyer; payment window 2s: …".
func describeRules(quantityMax, limit int, window time.Duration, pay, cancel float64, sale time.Duration) string {
	var parts []string
	if quantityMax > 1 || limit > 1 {
		parts = append(parts, fmt.Sprintf("1–%d units an order, limit %d per buyer", max(quantityMax, 1), max(limit, 1)))
	}
	if window > 0 {
		parts = append(parts, fmt.Sprintf("payment window %s: %.0f%% of orders paid, %.0f%% cancelled, %.0f%% never paid; "+
			"buyers without an order keep trying until every unit is paid or the sale ends (%s)",
			window, 100*pay, 100*cancel, 100*(1-pay-cancel), sale))
	}
	return strings.Join(parts, "; ")
}
