package admission

import (
	"context"
	"errors"
	"testing"

	"github.com/flashsale/flashsale"
)

// A pass is given back only when the order's answer proves nothing was
// placed; an answer that cannot tell spends it.
func TestSettlement(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "s"},
		{flashsale.Errorf(flashsale.ESoldOut, "x"), "o"},
		{flashsale.Errorf(flashsale.ELimitReached, "x"), "r"},
		{flashsale.Errorf(flashsale.EDuplicateOrder, "x"), "r"},
		{flashsale.Errorf(flashsale.EInvalid, "x"), "r"},
		{flashsale.Errorf(flashsale.EEnded, "x"), "r"},
		{flashsale.Errorf(flashsale.EBusy, "x"), "r"},
		{flashsale.Errorf(flashsale.EUnavailable, "may have been taken"), "s"},
		{errors.New("boom"), "s"},
		{context.Canceled, "s"},
	} {
		if got := settlement(tc.err); got != tc.want {
			t.Errorf("settlement(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
