package lab

import (
	"fmt"
	"strings"
)

// Verdicts returns a few plain sentences on what the rows show, derived
// from their numbers: one per row that went wrong, saying how, and one for
// the rows that were exact.
func Verdicts(rows []Row) []string {
	var (
		out   []string
		exact []string
	)
	for _, r := range rows {
		problems := r.problems()
		if len(problems) == 0 {
			exact = append(exact, fmt.Sprintf("%s (%d orders for %d units)", r.Strategy, r.Orders, r.Stock))
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s.", r.Strategy, strings.Join(problems, "; ")))
	}
	if len(exact) > 0 {
		out = append(out, fmt.Sprintf("exact: %s: nothing oversold, one order per buyer, no accepted order lost, no stock drift, nothing undersold.",
			strings.Join(exact, ", ")))
	}
	return out
}

// problems describes what the row's audit and answers found wrong.
func (r *Row) problems() []string {
	var p []string
	if r.Oversold > 0 {
		p = append(p, fmt.Sprintf("oversold %d (%d orders for %d units)", r.Oversold, r.Orders, r.Stock))
	}
	if r.StockDrift < 0 {
		p = append(p, fmt.Sprintf("stock drift %d: %d stock updates lost (the stock fell by %d for %d orders)", r.StockDrift, -r.StockDrift, r.Stock-r.RemainingDB, r.Orders))
	}
	if r.StockDrift > 0 {
		p = append(p, fmt.Sprintf("stock drift %+d: %d units of stock were taken without an order", r.StockDrift, r.StockDrift))
	}
	if r.DuplicateBuyers > 0 {
		p = append(p, fmt.Sprintf("%d duplicate buyers (holding more than one order)", r.DuplicateBuyers))
	}
	if r.Lost > 0 {
		p = append(p, fmt.Sprintf("%d lost orders (accepted, missing from MySQL)", r.Lost))
	}
	if r.Undersold > 0 {
		p = append(p, fmt.Sprintf("undersold %d (units left while buyers without an order were turned away)", r.Undersold))
	}
	if r.Errors > 0 {
		p = append(p, fmt.Sprintf("%d errors: %d of %d requests got no usable answer", r.Errors, r.Errors, r.Requests))
	}
	return p
}
