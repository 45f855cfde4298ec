// Package lab is the load lab: it runs a flash sale against running
// flashsale servers the way a JMeter stress test does (many buyers, each
// clicking several times, some twice at the same instant), then audits what
// the database and Redis hold afterwards, and reports both.
//
// The pieces can be used on their own:
//
//   - Plan and Load send the requests, closed model (a fixed number in
//     flight) or open model (a fixed schedule, latency measured from the
//     scheduled time), round robin across the servers, and record every
//     answer and its latency.
//   - Check turns Evidence (what the answers said, and what MySQL and Redis
//     hold) into Findings: oversold, duplicate buyers, lost orders,
//     undersold stock and stock drift. Collect gathers the Evidence from
//     the backends; it never counts answers where the tables can be read.
//   - Sale does a whole run: it creates a voucher, mints buyer tokens,
//     runs the Load, waits for the async pipeline to drain, audits, and
//     measures the servers' ceiling on GET /healthz with the same requests,
//     closed loop.
//   - WriteTable and Verdicts report the Rows of several runs; WriteJSON
//     and WriteHTML a Report: the runs' Setup and their Rows.
package lab

import "errors"

// Sentinel errors.
var (
	// ErrNotDrained is returned by Sale.Run when the async pipeline still
	// had orders in flight when the drain timeout ran out; the Row is
	// audited anyway.
	ErrNotDrained = errors.New("lab: async pipeline did not drain")
	// ErrTransport is wrapped when requests failed without an HTTP answer.
	ErrTransport = errors.New("lab: transport errors")
	// ErrUnreachable is wrapped when a target gave no answer for a few
	// seconds while its requests failed: the run stops there.
	ErrUnreachable = errors.New("lab: target unreachable")
	// ErrSetup is wrapped when a sale could not be set up (the voucher
	// could not be created, tokens could not be minted).
	ErrSetup = errors.New("lab: setup failed")
	// ErrForeignConsumer is wrapped when a consumer the lab did not start
	// read the sale's orders: another deployment runs on the lab's Redis
	// prefix. The run stops there; its audit would not be the lab's.
	ErrForeignConsumer = errors.New("lab: a consumer the lab did not start read the sale's orders")
)
