package main

import (
	"errors"
	"flag"
	"slices"
	"time"

	"github.com/flashsale/flashsale/lab"
)

// benchCrowd are bench's flags of a sale of bots and people (lab.Crowd):
// how many bot accounts and how fast they fire, the time before the start
// in which the people arrive, and the voucher's admission.
type benchCrowd struct {
	bots           int
	botRate        float64
	lead           time.Duration
	admission      string
	admitPerSecond int
}

func (c *benchCrowd) register(fs *flag.FlagSet) {
	fs.IntVar(&c.bots, "bots", 0, "bot accounts besides the --users people: each fires --bot-rate requests/s from the sale's first millisecond (or, on a queue, joins it at once and polls at that rate); the report splits the units won between bots and people")
	fs.Float64Var(&c.botRate, "bot-rate", 20, "with --bots: requests per second of each bot, one at a time (the servers' rate limits apply as they would)")
	fs.DurationVar(&c.lead, "queue-lead", 3*time.Second, "with --bots or --admission: the time from the voucher's creation to its begin_time, over which people join a queue (real drops: minutes; short so a lab run is)")
	fs.StringVar(&c.admission, "admission", "", `the voucher's admission: "open" or "queue" (a waiting room), or both comma-separated for a run of each, side by side (implies the bots-and-people sale, with --bots 0 if not given)`)
	fs.IntVar(&c.admitPerSecond, "admit-per-second", 100, "with --admission queue: the voucher's admit_per_second")
}

// on reports whether the sale is one of bots and people.
func (c *benchCrowd) on() bool { return c.bots > 0 || c.admission != "" }

// validate checks the crowd's flags against the rest of bench's.
func (c *benchCrowd) validate(cfg *benchConfig) error {
	switch {
	case !c.on():
		return nil
	case c.bots < 0 || !(c.botRate > 0): // NaN too
		return errors.New("--bots must not be negative and --bot-rate must be positive")
	case c.lead < 0:
		return errors.New("--queue-lead must not be negative")
	case !c.valid():
		return errors.New(`--admission must be "open", "queue" or both, comma-separated`)
	case slices.Contains(c.admissions(), lab.AdmissionQueue) && c.admitPerSecond < 1:
		return errors.New("--admit-per-second must be positive")
	case cfg.rules.window > 0 || cfg.rate > 0:
		return errors.New("--bots and --admission make a sale of bots and people: without --payment-window or --rate (its load is the crowd's)")
	}
	return nil
}

// admissions returns the admissions --admission lists, in order: [""]
// when it lists none (the servers' default).
func (c *benchCrowd) admissions() []string {
	list := slices.Compact(splitList(c.admission))
	if len(list) == 0 {
		return []string{""}
	}
	return list
}

// valid reports whether --admission lists only open and queue.
func (c *benchCrowd) valid() bool {
	for _, a := range c.admissions() {
		if a != "" && a != lab.AdmissionOpen && a != lab.AdmissionQueue {
			return false
		}
	}
	return true
}

// apply gives the sale its crowd, if any, on sale for saleFor (the
// --sale-duration) after the start.
func (c *benchCrowd) apply(s *lab.Sale, saleFor time.Duration) {
	if c.on() {
		s.Crowd = &lab.Crowd{Bots: c.bots, BotRate: c.botRate, Lead: c.lead, Admission: c.admission, AdmitPerSecond: c.admitPerSecond}
		s.SaleDuration = saleFor
	}
}

// describe adds the crowd to a setup.
func (c *benchCrowd) describe(s *lab.Setup) {
	if !c.on() {
		return
	}
	s.Bots, s.BotRate, s.QueueLead, s.Admission, s.Requests = c.bots, c.botRate, c.lead.String(), c.admission, 0
	if slices.Contains(c.admissions(), lab.AdmissionQueue) {
		s.AdmitPerSecond = c.admitPerSecond
	}
}
