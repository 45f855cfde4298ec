package metrics

import (
	"context"
	"time"

	"github.com/flashsale/flashsale"
)

// audited is a voucher's last audit and when it is due again.
type audited struct {
	a    flashsale.Audit
	next time.Time
}

// auditDuty bounds the share of time the sampler spends auditing a
// voucher in MySQL: an audit scans the voucher's orders, so its cost
// grows with them, and after one that took d the next waits at least
// auditDuty×d (and one pass). The stock left is read every pass, from
// the voucher's row.
const auditDuty = 50

// audit returns the voucher's audit: the last one until it is due again
// (auditDuty), so the figures that scan its orders (orders by status,
// units, MySQL's drift) may be a few passes old, but are from one
// snapshot.
func (s *Sampler) audit(ctx context.Context, id int64) (flashsale.Audit, error) {
	start := time.Now()
	s.mu.Lock()
	last, ok := s.audits[id]
	s.mu.Unlock()
	if ok && start.Before(last.next) {
		return last.a, nil
	}
	a, err := s.cfg.DB.AuditVoucher(ctx, id)
	if err != nil {
		return a, err
	}
	s.mu.Lock()
	s.audits[id] = audited{a: a, next: start.Add(auditDuty * time.Since(start))}
	s.mu.Unlock()
	return a, nil
}
