package lab

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// CrowdResult is what the bots and the people of a sale with a Crowd won,
// and what the queue answered them: a run's "crowd" in flashsale bench
// --json (null without a Crowd).
type CrowdResult struct {
	// Admission is the voucher's: "open" or "queue".
	Admission string `json:"admission"`
	// The accounts, and the units their live orders hold in MySQL.
	Humans     int `json:"humans"`
	Bots       int `json:"bots"`
	HumanUnits int `json:"human_units"`
	BotUnits   int `json:"bot_units"`
	// The queue's answers (zero with open admission): tickets had,
	// polls answered, the accounts admitted (given a pass) and those
	// whose ticket ended sold_out or expired, refusals by code, and queue
	// requests that got no usable answer.
	Joins          int            `json:"joins"`
	Polls          int            `json:"polls"`
	Admitted       int            `json:"admitted"`
	SoldOutTickets int            `json:"sold_out_tickets"`
	ExpiredTickets int            `json:"expired_tickets"`
	QueueRefused   map[string]int `json:"queue_refused"`
	QueueErrors    int            `json:"queue_errors"`
	// PassReused counts the orders accepted with a pass another accepted
	// order had spent (each bot tries its pass twice, a double click
	// sends it twice). A correct sale has none.
	PassReused int `json:"pass_reused"`
	// Stranded counts the accounts still waiting or trying when the sale
	// ended: with units left, buyers the sale failed to serve.
	Stranded int `json:"stranded"`
}

// problems says what went wrong for the crowd of a row that sold units
// of stock.
func (c *CrowdResult) problems(units, stock int) []string {
	var p []string
	if c.PassReused > 0 {
		p = append(p, fmt.Sprintf("%d orders accepted with a pass already spent", c.PassReused))
	}
	if c.Stranded > 0 && units < stock {
		p = append(p, fmt.Sprintf("%d accounts still waiting or trying when the sale ended, with %d units unsold", c.Stranded, stock-units))
	}
	return p
}

// BotShareSlack is the goal for a queue: the bots' share of the
// units sold at most their share of the accounts plus this many points.
const BotShareSlack = 5.0

// count splits the units users' live orders hold between the people
// (ids 1..humans) and the bots.
func (c *CrowdResult) count(userUnits map[int64]int, humans int) {
	c.HumanUnits, c.BotUnits = 0, 0
	for u, n := range userUnits {
		if u > int64(humans) {
			c.BotUnits += n
		} else {
			c.HumanUnits += n
		}
	}
}

// AccountShare is the bots' share of the accounts, in percent.
func (c *CrowdResult) AccountShare() float64 { return share(c.Bots, c.Bots+c.Humans) }

// UnitShare is the bots' share of the units sold, in percent.
func (c *CrowdResult) UnitShare() float64 { return share(c.BotUnits, c.BotUnits+c.HumanUnits) }

// Fair reports whether the bots won at most their share of the accounts
// plus BotShareSlack points.
func (c *CrowdResult) Fair() bool { return c.UnitShare() <= c.AccountShare()+BotShareSlack }

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return round(100*float64(n)/float64(of), 1)
}

// WriteCrowdTable writes what the bots and the people of the rows with a
// Crowd won, and what the queue answered them.
func WriteCrowdTable(w io.Writer, rows []Row) error {
	width := strategyWidth(rows)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	heading := false
	for _, r := range rows {
		c := r.Crowd
		if c == nil {
			continue
		}
		if !heading {
			fmt.Fprintf(tw, "%-*s\t\t\t\tbot\tbot\thuman\tbot\t\t\tsold out\tpass\t\n", width, "")
			fmt.Fprintf(tw, "%-*s\tadmission\thumans\tbots\taccounts\tunits\tunits\tunits\tjoins\tadmitted\ttickets\treused\t\n", width, "strategy")
			heading = true
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%d\t%d\t%.1f%%\t%d\t%d\t%.1f%%\t%d\t%d\t%d\t%d\t\n", width, r.Strategy, c.Admission, c.Humans, c.Bots,
			c.AccountShare(), c.BotUnits, c.HumanUnits, c.UnitShare(), c.Joins, c.Admitted, c.SoldOutTickets, c.PassReused)
	}
	return tw.Flush()
}

// crowdVerdicts are the sentences on what the bots won in the rows with a
// Crowd.
func crowdVerdicts(rows []Row) []string {
	var out []string
	for _, r := range rows {
		c := r.Crowd
		if c == nil {
			continue
		}
		s := fmt.Sprintf("%s, %s admission: the bots, %.1f%% of the accounts, won %.1f%% of the units (%d of %d)",
			r.Strategy, c.Admission, c.AccountShare(), c.UnitShare(), c.BotUnits, c.BotUnits+c.HumanUnits)
		goal := "within"
		if !c.Fair() {
			goal = "beyond"
		}
		s += fmt.Sprintf(", %s their share + %g points", goal, BotShareSlack)
		if c.PassReused > 0 {
			s += fmt.Sprintf("; %d orders were accepted with a pass already spent", c.PassReused)
		}
		out = append(out, s+".")
	}
	return out
}
