package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lab"
)

// benchRules are bench's flags of the purchase rules and the order's life
// (docs/lifecycle.md): the quantity an order asks for, the voucher's limit
// per buyer, and its payment window with what the buyers do in it.
type benchRules struct {
	quantityMax int
	limit       int
	window      time.Duration
	pay, cancel float64
	saleFor     time.Duration
	// payments is --payment-secret-file: with --target, the servers'
	// secret; otherwise bench makes one for its instances.
	payments paymentFlags
}

func (r *benchRules) register(fs *flag.FlagSet) {
	fs.IntVar(&r.quantityMax, "quantity-max", 1, "each order asks for a quantity drawn uniformly from 1 to this (at most --limit-per-buyer)")
	fs.IntVar(&r.limit, "limit-per-buyer", 1, fmt.Sprintf("the voucher's limit_per_buyer: the units one buyer may hold (1-%d, at most --stock)", flashsale.MaxLimitPerBuyer))
	fs.DurationVar(&r.window, "payment-window", 0, "the voucher's payment window, in whole seconds (0: none): buyers pay, cancel or let their orders expire, and the buyers without an order keep trying until every unit is paid")
	fs.Float64Var(&r.pay, "pay-ratio", 0.7, "with --payment-window: the share of accepted orders paid (signed webhook, after a think time within the window)")
	fs.Float64Var(&r.cancel, "cancel-ratio", 0.1, "with --payment-window: the share of accepted orders their buyers cancel; the rest are never paid and expire")
	fs.DurationVar(&r.saleFor, "sale-duration", time.Minute, "with --payment-window: how long the voucher is on sale, so how long buyers keep trying for the units that come back; with --bots or --admission: how long it is on sale after the start")
	fs.StringVar(&r.payments.file, "payment-secret-file", "", "with --target and --payment-window: the servers' --payment-secret-file, to sign the buyers' payments")
}

// validate checks the rules against a voucher of stock units.
func (r *benchRules) validate(stock int, targets bool) error {
	switch {
	case r.limit < 1 || r.limit > flashsale.MaxLimitPerBuyer || r.limit > stock:
		return fmt.Errorf("--limit-per-buyer must be 1 to %d and at most --stock", flashsale.MaxLimitPerBuyer)
	case r.quantityMax < 1 || r.quantityMax > r.limit:
		return errors.New("--quantity-max must be 1 to --limit-per-buyer (a larger quantity is refused as invalid)")
	case r.window < 0 || r.window%time.Second != 0 || r.window > flashsale.MaxPaymentWindowSeconds*time.Second:
		return fmt.Errorf("--payment-window must be whole seconds, up to %ds", flashsale.MaxPaymentWindowSeconds)
	case !(r.pay >= 0 && r.cancel >= 0 && r.pay+r.cancel <= 1): // NaN too
		return errors.New("--pay-ratio and --cancel-ratio must be within [0, 1], and their sum at most 1")
	case r.saleFor <= 0:
		return errors.New("--sale-duration must be positive")
	case targets && r.window > 0 && r.payments.file == "":
		return errors.New("with --target and --payment-window, give --payment-secret-file: the servers' payment secret, to sign the buyers' payments")
	}
	_, err := r.payments.secret()
	return err
}

// restricted reports whether the rules need a safe strategy: the unsafe
// ones refuse a payment window and a limit above 1.
func (r *benchRules) restricted() bool { return r.window > 0 || r.limit > 1 }

// keep returns the runs the rules allow, and names those left out.
func (r *benchRules) keep(runs []string) (kept, skipped []string) {
	for _, run := range runs {
		name, _ := runStrategy(run)
		if e, ok := lookupStrategy(name); ok && isUnsafe(e) && r.restricted() {
			skipped = append(skipped, run)
			continue
		}
		kept = append(kept, run)
	}
	return kept, skipped
}

// skippedNote says which strategies the rules left out, and why.
func skippedNote(skipped []string) string {
	return fmt.Sprintf("skipped %s: unsafe by design, they refuse a payment window and a limit per buyer above 1",
		strings.Join(skipped, ", "))
}

// apply gives the sale the rules; secret signs its payments.
func (r *benchRules) apply(s *lab.Sale, secret []byte) {
	s.QuantityMax, s.LimitPerBuyer = r.quantityMax, r.limit
	if r.window > 0 {
		s.PaymentWindow, s.PayRatio, s.CancelRatio, s.SaleDuration, s.PaymentSecret = r.window, r.pay, r.cancel, r.saleFor, secret
	}
}

// describe adds the rules to a setup.
func (r *benchRules) describe(s *lab.Setup) {
	s.QuantityMax, s.LimitPerBuyer = r.quantityMax, r.limit
	if r.window > 0 {
		s.PaymentWindowSeconds, s.PayRatio, s.CancelRatio, s.SaleDuration = int(r.window/time.Second), r.pay, r.cancel, r.saleFor.String()
	}
}

// paymentSecret returns the secret the buyers sign payments with: the
// servers', with --target; otherwise a new one, written to a file in dir
// for the instances (path). Without a payment window, none.
func (r *benchRules) paymentSecret(targets bool, dir string) (secret []byte, path string, err error) {
	switch {
	case r.window == 0:
		return nil, "", nil
	case targets:
		secret, err = r.payments.secret()
		return secret, "", err
	}
	secret = []byte(randomHex(32))
	path = filepath.Join(dir, "payment.secret")
	return secret, path, os.WriteFile(path, secret, 0o600)
}

// restrictedRuns are the runs of names the rules allow.
func restrictedRuns(r *benchRules, names []string, kinds string) []string {
	kept, _ := r.keep(stocklockRuns(names, kinds))
	return slices.Clip(kept)
}
