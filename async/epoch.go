package async

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// epochState is what a Service remembers of Redis's epoch.
type epochState struct {
	mu      sync.Mutex
	current string            // <prefix>epoch; "" before the first check
	seen    map[string]string // every epoch key read at the last check → its epoch (nodeepoch.go)
	backlog map[int64]int64   // voucher → orders not persisted at the last check that found its node whole
}

// The kinds of EpochLoss.
const (
	// LossEmptied: Redis's epoch changed (a restart without persistence, a
	// failover to a replica that had been reset or was in its first sync, a
	// FLUSHALL).
	LossEmptied = "emptied"
	// LossRewound: a voucher's level rose, so Redis went back in time (a
	// failover to a replica that lagged); see rewind.go.
	LossRewound = "rewound"
)

// EpochLoss is a loss of Redis's data that a service noticed.
type EpochLoss struct {
	Kind            string // LossEmptied or LossRewound
	Noticed         time.Time
	Previous, Epoch string
	// Node is the address of the Redis Cluster master that lost its data
	// (its slots' keys), "" outside Redis Cluster or for a rewind.
	Node string
	By   string // the instance that noticed, hostname-pid-random
	// MayBeLost bounds, from above, the accepted orders that were not
	// persisted when Redis lost them, as far as the instance that noticed
	// knows: the orders of its vouchers not persisted at its last check
	// plus the orders it accepted since. Other instances add their own
	// entries; orders whose gate reply was lost are not counted.
	MayBeLost int64
	// AtLeast bounds, from below, what a rewind took (LossRewound): the
	// accepted orders (or buyers recorded by a consumer) it lost.
	AtLeast int64
	// Vouchers lists "voucher:bound" for each voucher that may have lost
	// orders, comma-separated.
	Vouchers string
	// Shard is, for a rewind seen on a shard of a sharded voucher, the
	// shard's tag body ("<id>" or "<id>.<n>"); its bound is the shard's.
	Shard string
}

// WatchEpoch runs CheckEpoch every interval until ctx is done, logging
// what fails. The serve command runs it beside the gate.
func (s *Service) WatchEpoch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.CheckEpoch(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("async: checking Redis's epoch", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CheckEpoch reports whether Redis (on Redis Cluster, any master) lost its
// data since this Service last looked; if so it logs which vouchers may
// have lost accepted orders and how many at most, records the loss for
// reconcile (ReadEpochs) and reloads those vouchers from MySQL, so nothing
// MySQL holds is sold twice. How: DESIGN.md, "Noticing a lost Redis".
func (s *Service) CheckEpoch(ctx context.Context) (lost bool, err error) {
	s.epoch.mu.Lock()
	defer s.epoch.mu.Unlock()
	// The counters first, then the backlog, then the epochs: an order
	// accepted before the counters were taken is in the backlog unless it
	// was persisted, and a backlog read from an emptied node shows as a
	// changed epoch right after, so it is never trusted.
	kept := map[int64]*local{}
	s.locals.Range(func(k, v any) bool { kept[k.(int64)] = v.(*local); return true })
	counted := make(map[int64]int64, len(kept))
	for id, l := range kept {
		counted[id] = l.accepted.Swap(0)
	}
	changes, backlogs, top, err := s.readEpochState(ctx, kept)
	if err != nil {
		for id, n := range counted { // counted again at the next check
			kept[id].accepted.Add(n)
		}
		return false, err
	}
	for _, ch := range changes {
		hit := s.vouchersOn(ch.node, top, kept, counted)
		s.reportLoss(ctx, ch, hit)
		if top != nil && top.ownerOf(s.keys.Registry()) == ch.node {
			s.reRegister(ctx, kept, hit)
		}
		for id := range hit {
			delete(backlogs, id) // read from the emptied node, or after its reload
		}
	}
	s.epoch.backlog = backlogs
	return len(changes) > 0, nil
}

// readEpochState reads, in this order, the backlogs of the vouchers kept,
// the slot map (on Redis Cluster) and the epochs; it returns the epochs
// that changed since the last check, per node.
func (s *Service) readEpochState(ctx context.Context, kept map[int64]*local) (map[string]epochChange, map[int64]int64, topology, error) {
	backlogs, err := s.voucherBacklogs(ctx, kept)
	if err != nil {
		return nil, nil, nil, err
	}
	top, err := s.readTopology(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	candidate := make([]byte, 8)
	_, _ = rand.Read(candidate) // never fails
	changes, err := s.readEpochKeys(ctx, top, hex.EncodeToString(candidate)+"@"+time.Now().UTC().Format(time.RFC3339))
	return changes, backlogs, top, err
}

// voucherBacklogs returns how many orders of each voucher are not
// persisted, in one pipeline.
func (s *Service) voucherBacklogs(ctx context.Context, vouchers map[int64]*local) (map[int64]int64, error) {
	ids := make([]int64, 0, len(vouchers))
	vks := make([]layout.VoucherKeys, 0, len(vouchers))
	for id, l := range vouchers {
		for _, vk := range l.keysOf(s.keys, id) {
			ids = append(ids, id)
			vks = append(vks, vk)
		}
	}
	each, err := layout.Backlogs(ctx, s.client, vks, s.cfg.Group)
	if err != nil {
		return nil, fmt.Errorf("async: %w", err)
	}
	backlogs := make(map[int64]int64, len(ids))
	for i, n := range each {
		backlogs[ids[i]] += n
	}
	return backlogs, nil
}

// reportLoss logs a loss of Redis's data (of one master's, on Redis
// Cluster), records it for reconcile and reloads from MySQL the vouchers
// this instance sold there, counted holding the orders it accepted of each
// since the last check.
func (s *Service) reportLoss(ctx context.Context, ch epochChange, counted map[int64]int64) {
	var total int64
	var parts []string
	for id, n := range counted {
		b := s.epoch.backlog[id]
		if n+b > 0 {
			total += n + b
			parts = append(parts, fmt.Sprintf("%d:%d", id, n+b))
			s.log.Error("REDIS LOST ITS DATA: orders of this voucher accepted but not persisted are lost",
				"voucher", id, "node", ch.node, "unpersisted_at_last_check", b, "accepted_since", n, "may_be_lost", n+b)
		}
	}
	sort.Strings(parts)
	loss := EpochLoss{Kind: LossEmptied, Noticed: time.Now(), Previous: ch.prev, Epoch: ch.cur, Node: ch.node, By: layout.InstanceName(), MayBeLost: total, Vouchers: strings.Join(parts, ",")}
	s.log.Error("REDIS LOST ITS DATA (its epoch changed): vouchers reload from MySQL, orders accepted but not persisted are lost; run flashsale reconcile",
		"node", ch.node, "previous_epoch", ch.prev, "epoch", ch.cur, "may_be_lost", total, "vouchers", loss.Vouchers)
	if err := s.recordLoss(ctx, loss); err != nil {
		s.log.Error("async: recording the loss of Redis's data for reconcile", "err", err)
	}
	for id := range counted {
		if l, ok := s.locals.Load(id); ok {
			l.(*local).forgetLevel() // the reload starts a new history
		}
		if err := s.Reload(ctx, id); err != nil && flashsale.ErrorCode(err) != flashsale.EEnded {
			s.log.Warn("async: reloading a voucher after Redis lost its data; the next order retries", "voucher", id, "err", err)
		}
	}
}

// ReadEpochs returns Redis's current epoch ("" when there is none: no
// service ran since Redis was emptied) and the losses services recorded,
// oldest first, under prefix (DefaultPrefix when empty).
func ReadEpochs(ctx context.Context, client rueidis.Client, prefix string) (current string, losses []EpochLoss, err error) {
	k := layout.New(prefix)
	current, err = client.Do(ctx, client.B().Get().Key(k.Epoch()).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return "", nil, fmt.Errorf("async: epoch: %w", err)
	}
	entries, err := client.Do(ctx, client.B().Xrange().Key(k.Epochs()).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		return current, nil, fmt.Errorf("async: epochs: %w", err)
	}
	for _, e := range entries {
		losses = append(losses, parseLoss(e.FieldValues))
	}
	return current, losses, nil
}

// recordLoss appends a loss to the epochs stream, for reconcile
// (ReadEpochs reads it back with parseLoss).
func (s *Service) recordLoss(ctx context.Context, loss EpochLoss) error {
	cmd := s.client.B().Xadd().Key(s.keys.Epochs()).Maxlen().Almost().Threshold("1000").Id("*").FieldValue().
		FieldValue(layout.FieldLossKind, loss.Kind).
		FieldValue(layout.FieldNoticed, strconv.FormatInt(loss.Noticed.UnixMilli(), 10)).
		FieldValue(layout.FieldPrevious, loss.Previous).FieldValue(layout.FieldEpoch, loss.Epoch).
		FieldValue(layout.FieldNode, loss.Node).FieldValue(layout.FieldBy, loss.By).
		FieldValue(layout.FieldMayBeLost, strconv.FormatInt(loss.MayBeLost, 10)).
		FieldValue(layout.FieldAtLeast, strconv.FormatInt(loss.AtLeast, 10)).
		FieldValue(layout.FieldVouchers, loss.Vouchers).FieldValue(layout.FieldShard, loss.Shard).Build()
	return s.client.Do(ctx, cmd).Error()
}

// parseLoss reads an entry of the epochs stream; one written before kinds
// existed is LossEmptied.
func parseLoss(f map[string]string) EpochLoss {
	ms, _ := strconv.ParseInt(f[layout.FieldNoticed], 10, 64)
	most, _ := strconv.ParseInt(f[layout.FieldMayBeLost], 10, 64)
	least, _ := strconv.ParseInt(f[layout.FieldAtLeast], 10, 64)
	return EpochLoss{Kind: cmp.Or(f[layout.FieldLossKind], LossEmptied), Noticed: time.UnixMilli(ms),
		Previous: f[layout.FieldPrevious], Epoch: f[layout.FieldEpoch], Node: f[layout.FieldNode], By: f[layout.FieldBy],
		MayBeLost: most, AtLeast: least, Vouchers: f[layout.FieldVouchers], Shard: f[layout.FieldShard]}
}
