package flashsale

import (
	"errors"
	"fmt"
)

// What the system of record answers the async pipeline's consumer when it
// persists a batch of accepted orders. The consumer needs these answers,
// not the store that gives them: package store implements them, cmd
// passes it in.

// ErrStockShort is wrapped by a persister when a batch needs more of a
// voucher's stock than is left: nothing of the batch is stored, and the
// caller retries in smaller batches to find the orders that fit.
var ErrStockShort = errors.New("flashsale: stock short")

// ErrUnknownVoucher is wrapped by a persister when a batch's voucher is not
// in the system of record at all. Nothing of the batch is stored. It is a
// configuration error, not the orders' fault: the consumer reads a Redis
// prefix that belongs to another database (or the voucher's row was
// deleted by hand), so the orders must wait for the right database.
var ErrUnknownVoucher = errors.New("flashsale: voucher not in the system of record")

// Outcome is what persisting (or, synchronously, selling) did with one
// order of a batch.
type Outcome uint8

// The outcomes.
const (
	// OutcomeInserted: the order was stored now, with status created.
	OutcomeInserted Outcome = iota + 1
	// OutcomeAlreadyPresent: an order with the same id was stored before
	// (or earlier in the same batch): a redelivery.
	OutcomeAlreadyPresent
	// OutcomeConflict: another order id already holds the same voucher
	// and user (stored before or earlier in the same batch).
	OutcomeConflict
	// OutcomeShort: the stock ran out before the order's turn (a
	// synchronous batch sale only).
	OutcomeShort
	// OutcomeKeyConflict: another order id already holds the order's
	// idempotency key for its voucher and user (or another unique key of
	// the orders, but its id): the gate placed a key's order twice.
	OutcomeKeyConflict
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case OutcomeInserted:
		return "inserted"
	case OutcomeAlreadyPresent:
		return "already present"
	case OutcomeConflict:
		return "conflict"
	case OutcomeShort:
		return "short"
	case OutcomeKeyConflict:
		return "key conflict"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// PersistResult tells what persisting a batch did with each order.
type PersistResult struct {
	// Outcomes[i] is the outcome of the batch's orders[i].
	Outcomes []Outcome
	// Counts of each outcome (Conflicts counts both kinds).
	Inserted, AlreadyPresent, Conflicts int
}

// Audit is what the system of record says about one voucher, for the load
// lab's verdict and for reconciliation with Redis. With no oversell and no
// lost update, Stock == Remaining + Units and DuplicateBuyers == 0; with
// no payment after a close, PaidAfterClose == 0.
type Audit struct {
	Stock     int
	Remaining int
	// Orders counts the live orders (pending, awaiting payment, paid,
	// created), and Units the units they hold.
	Orders, Units int
	// DistinctBuyers counts the users with a live order; DuplicateBuyers
	// those whose live units pass the voucher's limit (with a limit of 1,
	// those with two live orders). The store's CHECK makes that
	// impossible; an audit checks it rather than trusts it.
	DistinctBuyers  int
	DuplicateBuyers int
	// Orders by status (of the live ones: Paid and AwaitingPayment).
	Paid, AwaitingPayment, Cancelled, Expired int
	// ReturnedUnits counts the units of cancelled and expired orders,
	// ReturnsPending the closed orders whose return is not done yet, and
	// PaidAfterClose the closed orders that carry a payment.
	ReturnedUnits, ReturnsPending, PaidAfterClose int
}
