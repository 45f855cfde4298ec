package lab

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// Report is what a bench writes, as JSON or HTML: how its runs were made
// and one Row per run.
type Report struct {
	Setup Setup `json:"setup"`
	Runs  []Row `json:"runs"`
	// Lifecycle is a second set of runs made another way, as flashsale
	// demo makes sales with a payment window after its main ones; absent
	// from bench's.
	Lifecycle *Report `json:"lifecycle,omitempty"`
}

// Setup is how a bench's runs were made: where the servers ran, on which
// backends, and the load they got.
type Setup struct {
	// Mode is how the servers ran: ModeInProcess, ModeProcesses or
	// ModeTargets (already running, at Targets).
	Mode      string   `json:"mode"`
	Targets   []string `json:"targets"`
	Instances int      `json:"instances"` // per strategy
	// Redis and DB are where the audit read, passwords hidden.
	Redis string `json:"redis"`
	DB    string `json:"db"`
	// RaceWindow is the instances' --race-window; empty with targets,
	// whose own the lab does not know.
	RaceWindow string `json:"race_window"`
	// The sale: a voucher of Stock units (in Shards), Users buyers sending
	// Requests order attempts, a share DoubleClicks of them double clicks,
	// shuffled by Seed.
	Stock        int     `json:"stock"`
	Shards       int     `json:"shards"`
	Users        int     `json:"users"`
	Requests     int     `json:"requests"`
	DoubleClicks float64 `json:"double_clicks"`
	Seed         uint64  `json:"seed"`
	// The purchase rules: each order asks for 1..QuantityMax units, and a
	// buyer may hold LimitPerBuyer. With a payment window (seconds; 0:
	// none), a share PayRatio of the accepted orders is paid, CancelRatio
	// cancelled, the rest left to expire, and the buyers keep trying for
	// at most SaleDuration.
	QuantityMax          int     `json:"quantity_max"`
	LimitPerBuyer        int     `json:"limit_per_buyer"`
	PaymentWindowSeconds int     `json:"payment_window_seconds"`
	PayRatio             float64 `json:"pay_ratio"`
	CancelRatio          float64 `json:"cancel_ratio"`
	SaleDuration         string  `json:"sale_duration"`
	// A sale of bots and people (Sale.Crowd): Bots accounts besides the
	// Users people, each sending BotRate requests per second, QueueLead
	// from the voucher's creation to its start, its Admission ("": the
	// servers' default, open) and, with a queue, AdmitPerSecond. Users
	// are then the people, and Requests 0 (each row counts its own).
	Bots           int     `json:"bots,omitempty"`
	BotRate        float64 `json:"bot_rate,omitempty"`
	QueueLead      string  `json:"queue_lead,omitempty"`
	Admission      string  `json:"admission,omitempty"`
	AdmitPerSecond int     `json:"admit_per_second,omitempty"`
	// Concurrency bounds the requests in flight; Rate, when positive, is
	// the open model's requests per second (0: the closed model).
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate"`
	// Machine is where the load ran (Machine()).
	Machine string `json:"machine"`
}

// The modes of a Setup.
const (
	ModeInProcess = "in-process"
	ModeProcesses = "processes"
	ModeTargets   = "targets"
)

// Machine describes this machine for a Setup: OS and architecture, CPUs,
// Go version.
func Machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}

// Sale says what the sale was: "stock 50, 300 buyers, 900 order attempts
// (double-click chance 0.25)".
func (s Setup) Sale() string {
	shards := ""
	if s.Shards > 1 {
		shards = fmt.Sprintf(" in %d shards", s.Shards)
	}
	sale := fmt.Sprintf("stock %d%s, %d buyers, %d order attempts (double-click chance %g)", s.Stock, shards, s.Users, s.Requests, s.DoubleClicks)
	if s.QueueLead != "" {
		sale = fmt.Sprintf("stock %d%s, %s", s.Stock, shards, s.crowd())
	}
	window := time.Duration(s.PaymentWindowSeconds) * time.Second
	sd, _ := time.ParseDuration(s.SaleDuration) // "" when there is no window: 0
	if rules := describeRules(s.QuantityMax, s.LimitPerBuyer, window, s.PayRatio, s.CancelRatio, sd); rules != "" {
		sale += "; " + rules
	}
	return sale
}

// Model says how the load was sent: the closed model's requests in flight,
// or the open model's rate.
func (s Setup) Model() string {
	if s.Rate > 0 {
		return fmt.Sprintf("open model, %g requests/s (at most %d in flight), latency from the scheduled send time", s.Rate, s.Concurrency)
	}
	return fmt.Sprintf("closed model, %d in flight", s.Concurrency)
}

// setupItem is one line of the report's setup: a name and what it was.
type setupItem struct{ Name, Value string }

// items are the setup as the HTML report lists it.
func (s Setup) items() []setupItem {
	servers := map[string]string{
		ModeInProcess: fmt.Sprintf("%d instances per strategy, inside the bench's process", s.Instances),
		ModeProcesses: fmt.Sprintf("%d flashsale serve processes per strategy", s.Instances),
		ModeTargets:   fmt.Sprintf("%d running server(s): %s", len(s.Targets), strings.Join(s.Targets, ", ")),
	}[s.Mode]
	window := s.RaceWindow
	if window == "" {
		window = "the servers' own (not known to the lab)"
	}
	return []setupItem{
		{"mode", s.Mode + ": " + servers},
		{"Redis", s.Redis},
		{"database", s.DB},
		{"race window", window},
		{"sale", s.Sale() + ", seed " + fmt.Sprint(s.Seed)},
		{"load", s.Model()},
		{"machine", s.Machine + " (where the load ran)"},
	}
}

// crowd says who a sale of bots and people had: "300 people and 100 bots
// (20 requests/s each), queue admission (50 admitted/s), start 3s after
// the voucher's creation".
func (s Setup) crowd() string {
	admission := strings.ReplaceAll(s.Admission, ",", " then ") + " admission"
	if s.Admission == "" {
		admission = "the servers' default admission (open)"
	}
	if s.AdmitPerSecond > 0 {
		admission += fmt.Sprintf(" (the queue admitting %d/s)", s.AdmitPerSecond)
	}
	return fmt.Sprintf("%d people (double-click chance %g) and %d bots (%g requests/s each), %s, start %s after the voucher's creation",
		s.Users, s.DoubleClicks, s.Bots, s.BotRate, admission, s.QueueLead)
}
