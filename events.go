package flashsale

import (
	"encoding/json"
	"strconv"
	"time"
)

// EventType is what an event reports (docs/events.md).
type EventType string

// The event types. An order's events: placed (or failed), then at most one
// of paid, cancelled and expired. pending is not an event: an async order
// is not in the system of record until the consumer persists it.
const (
	EventOrderPlaced      EventType = "order.placed"
	EventOrderPaid        EventType = "order.paid"
	EventOrderCancelled   EventType = "order.cancelled"
	EventOrderExpired     EventType = "order.expired"
	EventOrderFailed      EventType = "order.failed"
	EventVoucherSoldOut   EventType = "voucher.sold_out"
	EventVoucherRestocked EventType = "voucher.restocked"
)

// EventTypes returns every event type.
func EventTypes() []EventType {
	return []EventType{EventOrderPlaced, EventOrderPaid, EventOrderCancelled, EventOrderExpired, EventOrderFailed, EventVoucherSoldOut, EventVoucherRestocked}
}

// Valid reports whether t is a known event type.
func (t EventType) Valid() bool {
	for _, k := range EventTypes() {
		if t == k {
			return true
		}
	}
	return false
}

// EventTimeLayout is how an event's occurred_at is written: RFC 3339, UTC,
// with microseconds.
const EventTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Event is one thing that happened, as every sink sees it. ID is stable
// across redeliveries (deduplicate by it); Sequence increases along one
// order's (or voucher's) events.
type Event struct {
	ID         string          `json:"id"`
	Type       EventType       `json:"type"`
	OccurredAt time.Time       `json:"-"`
	Sequence   int64           `json:"sequence"`
	Data       json.RawMessage `json:"data"`
	// OrderID is the order an order event is of, VoucherID its voucher
	// (or the voucher of a voucher event): not in the body, for routing.
	OrderID   int64 `json:"-"`
	VoucherID int64 `json:"-"`
}

// eventJSON is the body of an event.
type eventJSON struct {
	ID         string          `json:"id"`
	Type       EventType       `json:"type"`
	OccurredAt string          `json:"occurred_at"`
	Sequence   int64           `json:"sequence"`
	Data       json.RawMessage `json:"data"`
}

// MarshalJSON writes the event's body: id, type, occurred_at, sequence, data.
func (e Event) MarshalJSON() ([]byte, error) {
	if !json.Valid(e.Data) {
		return json.Marshal(eventJSON{e.ID, e.Type, e.OccurredAt.UTC().Format(EventTimeLayout), e.Sequence, e.Data})
	}
	return e.AppendJSON(nil), nil
}

// AppendJSON appends the event's body to b, as MarshalJSON writes it,
// without checking Data, which must be valid JSON (the outbox's is: the
// store wrote it): the relays' fast path.
func (e Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendQuote(b, e.ID)
	b = append(b, `,"type":`...)
	b = strconv.AppendQuote(b, string(e.Type))
	b = append(b, `,"occurred_at":"`...)
	b = e.OccurredAt.UTC().AppendFormat(b, EventTimeLayout)
	b = append(b, `","sequence":`...)
	b = strconv.AppendInt(b, e.Sequence, 10)
	b = append(b, `,"data":`...)
	if len(e.Data) == 0 {
		b = append(b, "null"...)
	}
	b = append(b, e.Data...)
	return append(b, '}')
}

// UnmarshalJSON reads an event's body.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j eventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, j.OccurredAt)
	if err != nil {
		return err
	}
	*e = Event{ID: j.ID, Type: j.Type, OccurredAt: t, Sequence: j.Sequence, Data: j.Data}
	return nil
}

// EventID returns the id of the event with the given sequence.
func EventID(sequence int64) string { return "evt_" + strconv.FormatInt(sequence, 10) }

// OrderData is an order as an event's data shows it: as GET
// /api/orders/{id} does.
type OrderData struct {
	OrderID   string      `json:"order_id"`
	VoucherID string      `json:"voucher_id"`
	UserID    string      `json:"user_id"`
	Quantity  int         `json:"quantity"`
	Status    OrderStatus `json:"status"`
	// PayBy is set while the order awaits payment.
	PayBy string `json:"pay_by,omitempty"`
}

// EventData returns the order as an event's data.
func (o *Order) EventData() OrderData {
	d := OrderData{OrderID: strconv.FormatInt(o.ID, 10), VoucherID: strconv.FormatInt(o.VoucherID, 10),
		UserID: strconv.FormatInt(o.UserID, 10), Quantity: o.Units(), Status: o.Status}
	if !o.PayBy.IsZero() && (o.Status == StatusAwaitingPayment || o.Status == StatusPending) {
		d.PayBy = o.PayBy.UTC().Format(time.RFC3339Nano)
	}
	return d
}

// AppendJSON appends d as JSON to b, as json.Marshal writes it (no field
// needs escaping: ids and numbers are digits, the status and pay_by are
// ASCII without quotes), without its reflection and allocations: the
// store writes and reads one per order event.
func (d OrderData) AppendJSON(b []byte) []byte {
	b = append(b, `{"order_id":"`...)
	b = append(b, d.OrderID...)
	b = append(b, `","voucher_id":"`...)
	b = append(b, d.VoucherID...)
	b = append(b, `","user_id":"`...)
	b = append(b, d.UserID...)
	b = append(b, `","quantity":`...)
	b = strconv.AppendInt(b, int64(d.Quantity), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendQuote(b, string(d.Status))
	if d.PayBy != "" {
		b = append(b, `,"pay_by":`...)
		b = strconv.AppendQuote(b, d.PayBy)
	}
	return append(b, '}')
}

// AppendEventData appends o's EventData to b as JSON, as its AppendJSON
// writes it, without making its strings: the store expands thousands of
// order.placed a second from the orders table.
func (o *Order) AppendEventData(b []byte) []byte {
	b = append(b, `{"order_id":"`...)
	b = strconv.AppendInt(b, o.ID, 10)
	b = append(b, `","voucher_id":"`...)
	b = strconv.AppendInt(b, o.VoucherID, 10)
	b = append(b, `","user_id":"`...)
	b = strconv.AppendInt(b, o.UserID, 10)
	b = append(b, `","quantity":`...)
	b = strconv.AppendInt(b, int64(o.Units()), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendQuote(b, string(o.Status))
	if !o.PayBy.IsZero() && (o.Status == StatusAwaitingPayment || o.Status == StatusPending) {
		b = append(b, `,"pay_by":"`...)
		b = o.PayBy.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}

// EventOrder returns an order event's order_id field, or 0 when the data
// has none (a voucher event).
func EventOrder(data []byte) int64 {
	var d struct {
		OrderID string `json:"order_id"`
	}
	if json.Unmarshal(data, &d) != nil {
		return 0
	}
	n, _ := strconv.ParseInt(d.OrderID, 10, 64)
	return n
}

// Webhook is an endpoint of the shop's that events are POSTed to, signed
// per the Standard Webhooks spec.
type Webhook struct {
	ID  int64  `json:"id,string"`
	URL string `json:"url"`
	// Events are the types sent; empty: all.
	Events []EventType `json:"events"`
	// Secret ("whsec_" + base64) signs the deliveries; shown once, when
	// the endpoint is created.
	Secret string `json:"secret,omitempty"`
	// Disabled is set when the endpoint answered 410 Gone.
	Disabled bool `json:"disabled"`
	// Attempts and LastError describe the failing delivery at the head of
	// the endpoint's queue, if any.
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
	// DeadLetters counts the events the endpoint never took.
	DeadLetters int       `json:"dead_letters"`
	CreatedAt   time.Time `json:"created_at"`
}

// WebhookDeadLetter is an event an endpoint never took within the retry
// period, kept until the admin redelivers it.
type WebhookDeadLetter struct {
	EventID string `json:"event_id"`
	// Event is the body that was sent (the Event as JSON).
	Event     json.RawMessage `json:"event"`
	Attempts  int             `json:"attempts"`
	LastError string          `json:"last_error"`
	DeadAt    time.Time       `json:"dead_at"`
}

// Wants reports whether the endpoint is sent events of type t.
func (w *Webhook) Wants(t EventType) bool {
	if len(w.Events) == 0 {
		return true
	}
	for _, e := range w.Events {
		if e == t {
			return true
		}
	}
	return false
}
