package lab

import (
	"fmt"
	"slices"
	"strings"
)

// Verdicts returns a few plain sentences on what the rows show, derived
// from their numbers: one per row that went wrong, saying how, one for
// the rows that were exact, and one per row with a payment window on what
// became of its orders.
func Verdicts(rows []Row) []string {
	var (
		out   []string
		exact []string
		kept  []Row
	)
	for _, r := range rows {
		problems := r.problems()
		if len(problems) == 0 {
			exact = append(exact, fmt.Sprintf("%s (%s for %d units)", r.Strategy, r.sold(), r.Stock))
			kept = append(kept, r)
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s.", r.Strategy, strings.Join(problems, "; ")))
	}
	if len(exact) > 0 {
		out = append(out, fmt.Sprintf("exact: %s: %s.", strings.Join(exact, ", "), strings.Join(promises(kept), ", ")))
	}
	return append(append(out, lifecycleVerdicts(rows)...), crowdVerdicts(rows)...)
}

// promises says what the exact rows kept.
func promises(rows []Row) []string {
	limit := "one order per buyer"
	if slices.ContainsFunc(rows, func(r Row) bool { return r.LimitPerBuyer > 1 }) {
		limit = "no buyer past the limit"
	}
	p := []string{"nothing oversold", limit, "no accepted order lost", "no stock drift"}
	if slices.ContainsFunc(rows, func(r Row) bool { return r.Lifecycle == nil }) {
		p = append(p, "nothing undersold") // not judged with a payment window
	}
	if slices.ContainsFunc(rows, func(r Row) bool { return r.Lifecycle != nil }) {
		p = append(p, "no payment after close")
	}
	return p
}

// sold says what the live orders hold: "120 orders", or "50 units in 31
// orders" when an order may hold more than one.
func (r *Row) sold() string {
	if r.Units == r.Orders {
		return fmt.Sprintf("%d orders", r.Orders)
	}
	return fmt.Sprintf("%d units in %d orders", r.Units, r.Orders)
}

// problems describes what the row's audit and answers found wrong.
func (r *Row) problems() []string {
	var p []string
	if r.Oversold > 0 {
		p = append(p, fmt.Sprintf("oversold %d (%s for %d units)", r.Oversold, r.sold(), r.Stock))
	}
	if r.StockDrift < 0 {
		p = append(p, fmt.Sprintf("stock drift %d: %d stock updates lost (the stock fell by %d for %s)", r.StockDrift, -r.StockDrift, r.Stock-r.RemainingDB, r.sold()))
	}
	if r.StockDrift > 0 {
		p = append(p, fmt.Sprintf("stock drift %+d: %d units of stock were taken without an order", r.StockDrift, r.StockDrift))
	}
	switch {
	case r.DuplicateBuyers > 0 && r.LimitPerBuyer > 1:
		p = append(p, fmt.Sprintf("%d buyers past the limit of %d units (one holds %d)", r.DuplicateBuyers, r.LimitPerBuyer, r.MaxBuyerUnits))
	case r.DuplicateBuyers > 0:
		p = append(p, fmt.Sprintf("%d duplicate buyers (holding more than one order)", r.DuplicateBuyers))
	}
	if r.Lost > 0 {
		p = append(p, fmt.Sprintf("%d lost orders (accepted, missing from MySQL)", r.Lost))
	}
	if r.Undersold > 0 {
		p = append(p, fmt.Sprintf("undersold %d (units left while buyers without an order were turned away)", r.Undersold))
	}
	if r.Lifecycle != nil {
		p = append(p, r.Lifecycle.problems(r.Units)...)
	}
	if r.Crowd != nil {
		p = append(p, r.Crowd.problems(r.Units, r.Stock)...)
	}
	if r.Errors > 0 {
		p = append(p, fmt.Sprintf("%d errors: %d of %d requests got no usable answer", r.Errors, r.Errors, r.Requests))
	}
	return p
}
