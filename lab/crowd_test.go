package lab_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/lab"
)

// crowdSale is a small sale of 30 people and 10 bots (a quarter of the
// accounts) for 10 units, starting 300 ms after the voucher's creation.
func (s *shop) crowdSale(name, admission string) *lab.Sale {
	sale := s.sale(name, 10, 30, 30)
	sale.Crowd = &lab.Crowd{Bots: 10, BotRate: 50, Lead: 300 * time.Millisecond, Admission: admission, AdmitPerSecond: 20}
	sale.SaleDuration = 20 * time.Second
	return sale
}

// botUnits counts, in MySQL, the units of the voucher's live orders held
// by the bots (ids above people).
func (s *shop) botUnits(t *testing.T, voucherID int64, people int) (bots, all int) {
	t.Helper()
	_, orders, err := s.db.VoucherSnapshot(context.Background(), voucherID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range orders {
		if !o.Status.Live() {
			continue
		}
		all += o.Units()
		if o.UserID > int64(people) {
			bots += o.Units()
		}
	}
	return bots, all
}

// checkCrowd fails the test unless the row is exact and its split of the
// units between bots and people is MySQL's.
func checkCrowd(t *testing.T, s *shop, row lab.Row) *lab.CrowdResult {
	t.Helper()
	checkExact(t, row)
	c := row.Crowd
	if c == nil {
		t.Fatalf("no crowd in %+v", row)
	}
	bots, all := s.botUnits(t, row.VoucherID, c.Humans)
	if c.Humans != 30 || c.Bots != 10 || c.AccountShare() != 25 || c.BotUnits != bots || c.BotUnits+c.HumanUnits != all ||
		all != row.Stock || c.PassReused != 0 {
		t.Errorf("crowd %+v; MySQL: bots hold %d of %d units; want the stock sold, split as MySQL has it", *c, bots, all)
	}
	return c
}

// TestCrowdOnAnOpenSale: on an open sale the bots, firing from the
// start's first millisecond, and the people, arriving within two seconds,
// buy the whole stock exactly, and the report splits it as MySQL does.
func TestCrowdOnAnOpenSale(t *testing.T) {
	s := newShop(t, "async", 2)
	row, err := s.crowdSale("async", "").Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := checkCrowd(t, s, row)
	if c.Admission != lab.AdmissionOpen || c.Joins != 0 {
		t.Errorf("crowd %+v; want an open sale, nobody queued", *c)
	}
}

// TestCrowdOnAQueueSale: on a queue sale (two async instances, the
// waiting room admitting 20/s) the audit is exact — nothing oversold, no
// buyer past the limit, every order's pass spent once though each bot
// tries its pass twice and a double click sends it twice (the limit is 2,
// so a pass spent twice would show as a second unit) —, everyone who
// joined holds an order or a sold-out ticket, and the bots, a quarter of
// the accounts, win what the random draw gives them: at most 8 of the 10
// units (the draw gives them more once in 40,000 runs; an open sale
// gives them all 10).
func TestCrowdOnAQueueSale(t *testing.T) {
	s := newShopWith(t, "async", 2, true)
	sale := s.crowdSale("async", lab.AdmissionQueue)
	sale.LimitPerBuyer = 2
	row, err := sale.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := checkCrowd(t, s, row)
	if c.Admission != lab.AdmissionQueue || c.Joins != 40 || c.Admitted < 10 || c.Admitted+c.SoldOutTickets < 40 || c.Stranded != 0 {
		t.Errorf("crowd %+v; want 40 joins, everyone admitted or told sold_out", *c)
	}
	if row.Rejected["pass_invalid"] < c.BotUnits || row.MaxBuyerUnits != 1 {
		t.Errorf("%d pass_invalid refusals for %d units of bots, a buyer holds %d units; want every bot's second try refused, one unit each",
			row.Rejected["pass_invalid"], c.BotUnits, row.MaxBuyerUnits)
	}
	if c.BotUnits > 8 {
		t.Errorf("the bots won %d of 10 units with a quarter of the accounts", c.BotUnits)
	}
}

// TestCrowdStrandedIsAFinding: a queue voucher on servers without a
// waiting room (every join answered unavailable) sells nothing; the
// accounts still trying when the sale ends, with the stock unsold, make
// the row fail.
func TestCrowdStrandedIsAFinding(t *testing.T) {
	s := newShop(t, "conditional", 1)
	sale := s.crowdSale("conditional", lab.AdmissionQueue)
	sale.SaleDuration = time.Second
	row, err := sale.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := row.Crowd
	if c == nil || c.Stranded != 40 || c.Joins != 0 || c.QueueRefused["unavailable"] == 0 || row.Units != 0 || row.Exact() {
		t.Fatalf("row %+v, crowd %+v; want 40 accounts stranded, nothing sold, the row not exact", row, c)
	}
	if v := strings.Join(lab.Verdicts([]lab.Row{row}), "\n"); !strings.Contains(v, "40 accounts still waiting or trying when the sale ended, with 10 units unsold") {
		t.Errorf("verdicts: %s", v)
	}
}

// TestCrowdReport: the crowd's table and verdicts give the bots' share of
// the accounts and of the units, and whether it is within the goal.
func TestCrowdReport(t *testing.T) {
	rows := []lab.Row{
		{Strategy: "async", Stock: 100, Units: 100, Crowd: &lab.CrowdResult{Admission: "open", Humans: 400, Bots: 100, BotUnits: 90, HumanUnits: 10}},
		{Strategy: "async", Stock: 100, Units: 100, Crowd: &lab.CrowdResult{Admission: "queue", Humans: 400, Bots: 100, BotUnits: 24, HumanUnits: 76,
			Joins: 500, Admitted: 100, SoldOutTickets: 400}},
		{Strategy: "plain", Stock: 100, Units: 100},
	}
	var buf bytes.Buffer
	if err := lab.WriteCrowdTable(&buf, rows); err != nil {
		t.Fatal(err)
	}
	table := buf.String()
	for _, want := range []string{"open     400   100     20.0%     90     10  90.0%", "queue     400   100     20.0%     24     76  24.0%    500       100"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "plain") {
		t.Errorf("a row without a crowd is in the table:\n%s", table)
	}
	verdicts := strings.Join(lab.Verdicts(rows), "\n")
	for _, want := range []string{
		"async, open admission: the bots, 20.0% of the accounts, won 90.0% of the units (90 of 100), beyond their share + 5 points.",
		"async, queue admission: the bots, 20.0% of the accounts, won 24.0% of the units (24 of 100), within their share + 5 points.",
	} {
		if !strings.Contains(verdicts, want) {
			t.Errorf("verdicts lack %q:\n%s", want, verdicts)
		}
	}
	page := writeHTML(t, lab.Report{Setup: sampleSetup(), Runs: rows})
	if !strings.Contains(page, `<td data-field="bot_unit_share" data-value="90" class="bad">90.0%</td>`) ||
		!strings.Contains(page, `<td data-field="bot_unit_share" data-value="24">24.0%</td>`) {
		t.Errorf("the page lacks the bots' shares of the units")
	}
	rows[1].Crowd.PassReused = 1
	if rows[1].Exact() {
		t.Error("a row with a pass spent twice is exact")
	}
}
