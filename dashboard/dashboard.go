// Package dashboard serves the live sale page, GET /dashboard: static
// HTML, JavaScript and CSS embedded in the binary (no build step, nothing
// fetched from elsewhere), which polls the JSON endpoints this package
// adds:
//
//	GET /api/stats                  the vouchers watched, with their stock
//	                                and status, and the one to open on
//	GET /api/vouchers/{id}/stats    one voucher's figures, rates and history
//
// Anyone may read a sale's public figures: its status, its waiting room
// (a queue voucher's tickets waiting, admitted per second, the ETA of a
// ticket joining now), stock left in
// Redis and in MySQL, orders (of them, those paid and those awaiting
// payment, and the units cancelled and expired orders gave back),
// accepted and refused orders per second, the latency of its order
// requests. The pipeline's internals (backlog, dead letters, oversold,
// drift, returns pending, payments after a close) need the admin token, as
// the other operator routes do.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/metrics"
)

//go:embed assets
var assets embed.FS

// Dashboard serves the page and its endpoints.
type Dashboard struct {
	Sampler *metrics.Sampler
	Live    *metrics.Live
	// IsAdmin reports whether the request carries the admin token.
	IsAdmin func(r *http.Request) bool
	// Queues reads the waiting rooms of queue vouchers; nil: none shown.
	Queues Queues
}

// Queues reads a voucher's waiting room from Redis; *admission.Queue is
// one. A voucher without a room reads a zero admit_per_second.
type Queues interface {
	Stats(ctx context.Context, voucherID int64) (admission.Stats, error)
}

var _ Queues = (*admission.Queue)(nil)

// rateSeconds is how many complete seconds the rates average over.
const rateSeconds = 5

// Assets is the pattern of the page's static files (a subtree, not an
// API route).
const Assets = "GET /dashboard/"

// Register adds the page and its endpoints to mux.
func (d *Dashboard) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(assets, "assets") // the directory is embedded
	page := func(w http.ResponseWriter, r *http.Request) {
		// No other site may frame it (clickjacking the admin's view).
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		http.ServeFileFS(w, r, static, "index.html")
	}
	mux.Handle(Assets, http.StripPrefix("/dashboard/", http.FileServerFS(static)))
	for _, r := range []struct {
		pattern string
		h       http.HandlerFunc
	}{{"GET /dashboard", page}, {"GET /api/stats", d.list}, {"GET /api/vouchers/{id}/stats", d.voucher}} {
		mux.HandleFunc(r.pattern, r.h)
	}
}

// Routes returns the "METHOD pattern" of the page and its JSON endpoints
// (Assets aside), for the API description's test.
func Routes() []string {
	return []string{"GET /dashboard", "GET /api/stats", "GET /api/vouchers/{id}/stats"}
}

// summary is a voucher in the list.
type summary struct {
	ID             int64  `json:"id,string"`
	Title          string `json:"title"`
	Status         string `json:"status"`
	Stock          int    `json:"stock"`
	RemainingMySQL int    `json:"remaining_mysql"`
	RemainingRedis *int   `json:"remaining_redis"`
	Orders         int    `json:"orders"`
	// Of the orders in MySQL: paid, awaiting payment, cancelled and
	// expired, and the units of those given back to the stock; Pending,
	// the async orders accepted in Redis and not in MySQL yet (absent for
	// a synchronous strategy's voucher); the payment window, which says
	// which of these states apply (0: none but orders).
	Paid                 int       `json:"paid"`
	AwaitingPayment      int       `json:"awaiting_payment"`
	Cancelled            int       `json:"cancelled"`
	Expired              int       `json:"expired"`
	Returned             int       `json:"returned"`
	Pending              *int64    `json:"pending,omitempty"`
	PaymentWindowSeconds int       `json:"payment_window_seconds"`
	BeginTime            time.Time `json:"begin_time"`
	EndTime              time.Time `json:"end_time"`
}

// list is the body of GET /api/stats.
type list struct {
	SampledAt time.Time `json:"sampled_at"`
	Vouchers  []summary `json:"vouchers"`
	// Current is the id of the voucher the page opens on (see current),
	// null when the list is empty.
	Current *string `json:"current"`
}

func (d *Dashboard) list(w http.ResponseWriter, r *http.Request) {
	last, now := d.Sampler.Latest(), time.Now()
	body := list{SampledAt: last.At, Vouchers: make([]summary, 0, len(last.Vouchers))}
	for _, v := range last.Vouchers {
		body.Vouchers = append(body.Vouchers, public(v, now))
	}
	if i := current(last.Vouchers, now); i >= 0 {
		id := strconv.FormatInt(last.Vouchers[i].ID, 10)
		body.Current = &id
	}
	writeJSON(w, http.StatusOK, body)
}

// public returns what anyone may see of a voucher's sample at now.
func public(v metrics.VoucherSample, now time.Time) summary {
	return summary{ID: v.ID, Title: v.Title, Status: status(v, now), Stock: v.Stock, RemainingMySQL: v.RemainingMySQL,
		RemainingRedis: v.RemainingRedis, Orders: v.Orders, Paid: v.Paid, AwaitingPayment: v.AwaitingPayment, Returned: v.Returned,
		Cancelled: v.Cancelled, Expired: v.Expired, Pending: v.Backlog, PaymentWindowSeconds: v.PaymentWindowSeconds,
		BeginTime: v.BeginTime, EndTime: v.EndTime}
}

// operator is what the admin sees of a voucher: all its sample, and its
// status.
type operator struct {
	metrics.VoucherSample
	Status string `json:"status"`
}

// voucherStats is the body of GET /api/vouchers/{id}/stats.
type voucherStats struct {
	SampledAt time.Time        `json:"sampled_at"`
	Voucher   any              `json:"voucher"` // an operator for the admin, else a summary
	Rates     rates            `json:"rates"`
	Latency   latency          `json:"latency_ms"`
	Seconds   []metrics.Second `json:"seconds"`
	History   []metrics.Point  `json:"history"`
	Admin     bool             `json:"admin"`
	Outcomes  []string         `json:"outcomes"`
	// Queue is the voucher's waiting room; absent for an open voucher,
	// or a queue voucher nobody has joined yet.
	Queue *queueView `json:"queue,omitempty"`
}

// queueView is what anyone may see of a waiting room: the tickets
// waiting, the passes handed out in the last second and in all, the
// voucher's admit_per_second, the passes out (unused or being spent),
// the units still to be admitted, and the wait of a ticket joining now
// (nil with a reason: admission.Ticket).
type queueView struct {
	Waiting        int64  `json:"waiting"`
	AdmittedPerSec int64  `json:"admitted_per_second"`
	Admitted       int64  `json:"admitted"`
	Rate           int64  `json:"admit_per_second"`
	PassesOut      int64  `json:"passes_out"`
	UnitsAhead     int64  `json:"units_ahead"`
	ETASeconds     *int64 `json:"eta_seconds"`
	ETAReason      string `json:"eta_reason,omitempty"`
}

// queue returns the voucher's waiting room, or nil when it has none or
// Redis could not say (the page then shows no queue).
func (d *Dashboard) queue(ctx context.Context, id int64) *queueView {
	if d.Queues == nil {
		return nil
	}
	st, err := d.Queues.Stats(ctx, id)
	if err != nil || st.Rate <= 0 {
		return nil
	}
	return &queueView{Waiting: st.Waiting, AdmittedPerSec: st.AdmittedLastSecond, Admitted: st.Admitted, Rate: st.Rate,
		PassesOut: st.Unused + st.InFlight, UnitsAhead: st.UnitsAhead, ETASeconds: st.ETASeconds, ETAReason: st.ETAReason}
}

type rates struct {
	Accepted float64            `json:"accepted"`
	Refused  map[string]float64 `json:"refused"`
}

// latency is the p50 and p99 of the voucher's order requests on this
// instance over the last minute.
type latency struct {
	P50      float64 `json:"p50"`
	P99      float64 `json:"p99"`
	Requests int64   `json:"requests"`
}

func (d *Dashboard) voucher(w http.ResponseWriter, r *http.Request) {
	id, err := flashsale.ParseID(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, flashsale.EInvalid, "voucher id: "+err.Error())
		return
	}
	last, now := d.Sampler.Latest(), time.Now()
	body := voucherStats{SampledAt: last.At, Admin: d.IsAdmin != nil && d.IsAdmin(r), Outcomes: metrics.Outcomes}
	found := false
	for _, v := range last.Vouchers {
		if v.ID == id {
			body.Voucher, found = public(v, now), true
			if body.Admin {
				body.Voucher = operator{v, status(v, now)}
			}
		}
	}
	if !found {
		writeError(w, http.StatusNotFound, flashsale.ENotFound, "voucher "+strconv.FormatInt(id, 10)+" is not on sale now")
		return
	}
	body.Seconds = d.Live.Seconds(id, metrics.LiveSeconds-1)
	body.Rates = averageRates(body.Seconds[max(0, len(body.Seconds)-rateSeconds):])
	body.Latency.P50, body.Latency.P99, body.Latency.Requests = d.Live.Percentiles(id)
	body.History = d.Sampler.History(id)
	body.Queue = d.queue(r.Context(), id)
	if !body.Admin { // the pipeline's internals are for operators
		for i := range body.History {
			body.History[i].Backlog = nil
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// averageRates returns the per-second averages over secs.
func averageRates(secs []metrics.Second) rates {
	out := rates{Refused: map[string]float64{}}
	if len(secs) == 0 {
		return out
	}
	n := float64(len(secs))
	for _, s := range secs {
		out.Accepted += float64(s.Accepted) / n
		for k, c := range s.Refused {
			out.Refused[k] += float64(c) / n
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes the API's error shape.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}
