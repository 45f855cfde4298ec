package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// Row is one run of the lab: the answers, the audit and the speed. Its
// JSON form is the --json schema of flashsale bench.
type Row struct {
	Strategy  string `json:"strategy"`
	VoucherID int64  `json:"voucher_id,string"`
	Instances int    `json:"instances"`
	Stock     int    `json:"stock"`
	// From the answers.
	Requests int            `json:"requests"`
	Accepted int            `json:"accepted"`
	Rejected map[string]int `json:"rejected"`
	Errors   int            `json:"errors"`
	// From MySQL and Redis (see Findings). DuplicateBuyers counts the
	// buyers past LimitPerBuyer, the voucher's limit (with a limit of 1,
	// those holding two orders).
	Orders          int  `json:"orders"`
	Units           int  `json:"units"`
	LimitPerBuyer   int  `json:"limit_per_buyer"`
	MaxBuyerUnits   int  `json:"max_buyer_units"`
	DistinctBuyers  int  `json:"distinct_buyers"`
	DuplicateBuyers int  `json:"duplicate_buyers"`
	RemainingDB     int  `json:"remaining_db"`
	RemainingRedis  *int `json:"remaining_redis"`
	Oversold        int  `json:"oversold"`
	Lost            int  `json:"lost"`
	Undersold       int  `json:"undersold"`
	StockDrift      int  `json:"stock_drift"`
	// Lifecycle is what became of the orders of a sale with a payment
	// window; null without one.
	Lifecycle *Lifecycle `json:"lifecycle"`
	// Crowd is what the bots and the people of a sale with a Crowd won;
	// null without one.
	Crowd *CrowdResult `json:"crowd"`
	// Speed: answered requests per second and latency in ms, and the
	// answered requests per second of the same requests on GET /healthz,
	// closed loop.
	RPS        float64 `json:"rps"`
	P50Ms      float64 `json:"p50_ms"`
	P90Ms      float64 `json:"p90_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	CeilingRPS float64 `json:"ceiling_rps"`
	// Throughput and the latency distribution, for the HTML report
	// (series.go).
	Series
}

func (r *Row) setLoad(res *Result) {
	r.Requests, r.Accepted, r.Errors = res.Requests, res.Accepted, res.Errors
	r.Rejected = maps.Clone(res.Rejected)
	r.RPS = round(res.RPS(), 1)
	r.P50Ms, r.P90Ms, r.P99Ms = round(res.LatencyMs(50), 3), round(res.LatencyMs(90), 3), round(res.LatencyMs(99), 3)
	r.MaxMs = round(res.MaxLatencyMs(), 3)
	r.Series = seriesOf(res)
}

func (r *Row) setFindings(f Findings) {
	r.Orders, r.Units, r.MaxBuyerUnits = f.Orders, f.Units, f.MaxBuyerUnits
	r.DistinctBuyers, r.DuplicateBuyers = f.DistinctBuyers, f.DuplicateBuyers
	r.RemainingDB, r.RemainingRedis = f.RemainingDB, f.RemainingRedis
	r.Oversold, r.Lost, r.Undersold, r.StockDrift = f.Oversold, f.Lost, f.Undersold, f.StockDrift
	r.Lifecycle = f.Lifecycle
}

// findings returns the row's audit.
func (r *Row) findings() Findings {
	return Findings{Orders: r.Orders, Units: r.Units, MaxBuyerUnits: r.MaxBuyerUnits, DistinctBuyers: r.DistinctBuyers,
		DuplicateBuyers: r.DuplicateBuyers, RemainingDB: r.RemainingDB, RemainingRedis: r.RemainingRedis, Oversold: r.Oversold,
		Lost: r.Lost, Undersold: r.Undersold, StockDrift: r.StockDrift, Lifecycle: r.Lifecycle}
}

// Exact reports whether the row's audit found nothing wrong.
func (r *Row) Exact() bool {
	return r.findings().Exact() && (r.Crowd == nil || len(r.Crowd.problems(r.Units, r.Stock)) == 0)
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// WriteJSON writes rep to w, indented: {"setup": {...}, "runs": [...]}.
func WriteJSON(w io.Writer, rep Report) error {
	if rep.Runs == nil {
		rep.Runs = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes rows as a table that fits 100 columns: per run, what
// judges a strategy — the units sold for the stock, the audit's findings
// (oversold, buyers past the limit, lost orders, undersold, stock drift),
// the requests that got no answer, the rate and the p99 latency. Headings
// of two words stand on two lines. WriteWideTable has every column, and
// WriteLifecycleTable what became of the orders of a sale with a payment
// window.
func WriteTable(w io.Writer, rows []Row) error {
	width := strategyWidth(rows)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t\t\t\tdup\tlost\t\tstock\t\t\tp99\t\n", width, "")
	fmt.Fprintf(tw, "%-*s\tsold\tstock\toversold\tbuyers\torders\tundersold\tdrift\terrors\trps\tms\t\n", width, "strategy")
	for _, r := range rows {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%d\t%+d\t%d\t%.0f\t%.1f\t\n",
			width, r.Strategy, r.Units, r.Stock, r.Oversold, r.DuplicateBuyers, r.Lost, r.Undersold, r.StockDrift,
			r.Errors, r.RPS, r.P99Ms)
	}
	return tw.Flush()
}

// strategyWidth is the width of the strategy column: numbers align right,
// the strategy names are padded to read left.
func strategyWidth(rows []Row) int {
	width := len("strategy")
	for _, r := range rows {
		width = max(width, len(r.Strategy))
	}
	return width
}

// WriteWideTable writes rows as one aligned table with every column: the
// answers, the audit, what became of the orders when a row had a payment
// window, the speed (with the rate as a share of the /healthz ceiling)
// and, last, the refusals by code.
func WriteWideTable(w io.Writer, rows []Row) error {
	width := strategyWidth(rows)
	lifecycle := slices.ContainsFunc(rows, func(r Row) bool { return r.Lifecycle != nil })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	heading := []string{"inst", "requests", "accepted", "rejected", "errors", "orders", "units", "buyers", "dup buyers", "buyer max",
		"left db", "left redis", "oversold", "lost orders", "undersold", "stock drift"}
	if lifecycle {
		heading = append(heading, "paid units", "cancelled", "expired", "returned units", "resold units", "late", "paid after close", "unpaid")
	}
	heading = append(heading, "rps", "ceiling", "of ceiling", "p50 ms", "p90 ms", "p99 ms", "max ms")
	fmt.Fprintf(tw, "%-*s\t%s\t  rejected by code\n", width, "strategy", strings.Join(heading, "\t"))
	for _, r := range rows {
		cells := []any{r.Instances, r.Requests, r.Accepted, total(r.Rejected), r.Errors, r.Orders, r.Units, r.DistinctBuyers,
			r.DuplicateBuyers, r.MaxBuyerUnits, r.RemainingDB, optional(r.RemainingRedis), r.Oversold, r.Lost, r.Undersold,
			fmt.Sprintf("%+d", r.StockDrift)}
		if lc := r.Lifecycle; lc != nil {
			cells = append(cells, lc.PaidUnits, lc.Cancelled, lc.Expired, lc.ReturnedUnits, lc.Resold, lc.Late, lc.PaidAfterClose, lc.Unpaid)
		} else if lifecycle {
			cells = append(cells, "-", "-", "-", "-", "-", "-", "-", "-")
		}
		cells = append(cells, fmt.Sprintf("%.0f", r.RPS), fmt.Sprintf("%.0f", r.CeilingRPS), percent(r.RPS, r.CeilingRPS),
			fmt.Sprintf("%.1f", r.P50Ms), fmt.Sprintf("%.1f", r.P90Ms), fmt.Sprintf("%.1f", r.P99Ms), fmt.Sprintf("%.1f", r.MaxMs))
		fmt.Fprintf(tw, "%-*s", width, r.Strategy)
		for _, c := range cells {
			fmt.Fprintf(tw, "\t%v", c)
		}
		fmt.Fprintf(tw, "\t  %s\n", codes(r.Rejected))
	}
	return tw.Flush()
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func percent(x, of float64) string {
	if of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x/of)
}

// codes formats refusals as "sold_out=2650 duplicate_order=240", most
// frequent first.
func codes(m map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
