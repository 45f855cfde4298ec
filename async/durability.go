package async

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
)

// Durability says when the gate may tell a buyer that an order is
// accepted ("pending"): what a Redis crash or failover can cost.
type Durability string

// The durability modes.
const (
	// DurabilityMemory answers once Redis holds the order in memory. A
	// Redis crash without AOF, or a failover to a replica that had not
	// received it, loses accepted orders the consumer had not persisted.
	DurabilityMemory Durability = "memory"
	// DurabilityAOF answers once Redis has appended the order to its AOF
	// and fsynced it: the server must run with appendonly yes and
	// appendfsync always, which CheckDurability verifies. Redis fsyncs
	// before it sends the replies of an event-loop iteration, so the gate
	// needs nothing per order, and concurrent orders share an fsync.
	DurabilityAOF Durability = "aof"
	// DurabilityReplica answers once at least MinReplicas replicas have
	// acknowledged the order (WAIT, batched: see replicawait.go). A
	// failover to one of them loses nothing accepted.
	DurabilityReplica Durability = "replica"
)

// Defaults of DurabilityConfig.
const (
	DefaultMinReplicas    = 1
	DefaultReplicaTimeout = time.Second
)

// ParseDurability reads a mode by name; "" is DurabilityMemory.
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(strings.ToLower(strings.TrimSpace(s))); d {
	case "":
		return DurabilityMemory, nil
	case DurabilityMemory, DurabilityAOF, DurabilityReplica:
		return d, nil
	}
	return "", fmt.Errorf("async: durability %q: want memory, aof or replica", s)
}

// DurabilityConfig is Config.Durability.
type DurabilityConfig struct {
	// Mode is when an order is accepted (default DurabilityMemory).
	Mode Durability
	// MinReplicas is how many replicas must acknowledge an order in
	// DurabilityReplica (default 1).
	MinReplicas int
	// ReplicaTimeout is how long the gate waits for them (default 1s);
	// then the buyer gets EUnavailable, see ErrNotDurable.
	ReplicaTimeout time.Duration
	// Trusted records the operator's word that Redis keeps the promise of
	// Mode where CheckDurability cannot read its settings (CONFIG is
	// disabled on many managed Redis services). Settings it can read and
	// that break the promise are refused all the same.
	Trusted bool
}

// withDefaults fills in the zero fields.
func (c DurabilityConfig) withDefaults() DurabilityConfig {
	c.Mode = cmp.Or(c.Mode, DurabilityMemory)
	c.MinReplicas = cmp.Or(c.MinReplicas, DefaultMinReplicas)
	c.ReplicaTimeout = cmp.Or(c.ReplicaTimeout, DefaultReplicaTimeout)
	return c
}

// ErrDurability is wrapped by CheckDurability when Redis cannot keep the
// promise of the mode.
var ErrDurability = errors.New("async: Redis cannot keep the durability promised")

// notDurableRetry is the Retry-After of an order replicas did not confirm.
const notDurableRetry = time.Second

// notDurable is the answer to a buyer whose order, or the order a refusal
// would name, replicas did not confirm in time: it may exist (and then
// stands, holding the unit) or vanish in a failover, so it is neither
// accepted nor denied. A retry by the same buyer is answered
// duplicate_order naming it once it is safe, or takes a new order if it
// was lost: never two.
func notDurable(msg string) error {
	return &flashsale.Error{Code: flashsale.EUnavailable, Message: msg, RetryAfter: notDurableRetry}
}

// orderNotDurable is notDurable's message for a buyer's order attempt.
const orderNotDurable = "your order may have been taken but is not yet safe on enough Redis replicas; " +
	"try again: a retry names it (duplicate_order) once it is safe, or takes it anew if it was lost"

// CheckDurability checks, on every Redis node of the client, that the
// mode's promise can be kept, and logs what the mode costs. DurabilityAOF
// needs appendonly yes and appendfsync always (read with CONFIG GET); when
// CONFIG cannot be read it fails unless cfg.Trusted. DurabilityReplica
// logs a warning for a primary with fewer connected replicas than
// MinReplicas (orders then answer EUnavailable until they connect), and
// fails when the client's only node is a replica.
func CheckDurability(ctx context.Context, client rueidis.Client, cfg DurabilityConfig, log *slog.Logger) error {
	cfg = cfg.withDefaults()
	log = cmp.Or(log, slog.Default())
	switch cfg.Mode {
	case DurabilityMemory:
		log.Warn("async: durability memory: an order is accepted once Redis holds it in memory; " +
			"a Redis crash without AOF, or a failover to a replica that lagged, loses accepted orders " +
			"not persisted yet (see --durability aof or replica)")
		return nil
	case DurabilityAOF, DurabilityReplica:
	default:
		return fmt.Errorf("async: unknown durability %q", cfg.Mode)
	}
	nodes := client.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		var err error
		if cfg.Mode == DurabilityAOF {
			err = checkAOF(ctx, nodes[addr], cfg.Trusted, log)
		} else {
			err = checkReplicas(ctx, nodes[addr], cfg.MinReplicas, len(nodes) == 1, log)
		}
		if err != nil {
			return fmt.Errorf("redis %s: %w", addr, err)
		}
	}
	log.Info("async: durability", "mode", cfg.Mode, "min_replicas", cfg.MinReplicas, "replica_timeout", cfg.ReplicaTimeout, "nodes", len(addrs))
	return nil
}

// checkAOF checks one node's appendonly and appendfsync.
func checkAOF(ctx context.Context, node rueidis.Client, trusted bool, log *slog.Logger) error {
	want := [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}}
	for _, w := range want {
		got, err := node.Do(ctx, node.B().ConfigGet().Parameter(w[0]).Build()).AsStrMap()
		if err == nil && got[w[0]] == "" {
			err = fmt.Errorf("CONFIG GET %s answered nothing", w[0])
		}
		if err != nil {
			if trusted {
				log.Warn("async: DURABILITY AOF ON THE OPERATOR'S WORD: Redis's settings cannot be read; "+
					"accepted orders survive a Redis crash only if it runs with appendonly yes and appendfsync always",
					"setting", w[0], "err", err)
				continue
			}
			return fmt.Errorf("%w: durability aof needs %s %s, and it cannot be read (%w); "+
				"if the operator guarantees it, pass --durability-trusted", ErrDurability, w[0], w[1], err)
		}
		if got[w[0]] != w[1] {
			return fmt.Errorf("%w: durability aof needs %s %s, Redis has %s %s", ErrDurability, w[0], w[1], w[0], got[w[0]])
		}
	}
	return nil
}

// checkReplicas checks one node's role and replicas. A replica is refused
// when it is the only node the client knows (it cannot take orders); a
// cluster's replicas are skipped.
func checkReplicas(ctx context.Context, node rueidis.Client, min int, alone bool, log *slog.Logger) error {
	text, err := node.Do(ctx, node.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		return fmt.Errorf("async: durability replica: INFO replication: %w", err)
	}
	f := infoFields(text)
	if f["role"] != "master" {
		if !alone {
			return nil
		}
		return fmt.Errorf("%w: durability replica writes to a primary, this node's role is %q", ErrDurability, f["role"])
	}
	n, _ := strconv.Atoi(f["connected_slaves"])
	if n < min {
		log.Warn("async: durability replica: fewer replicas connected than --min-replicas; orders answer unavailable until they connect",
			"connected", f["connected_slaves"], "min_replicas", min)
	}
	checkPartitions(ctx, node, min, n, log)
	return nil
}

// PartitionWarning starts the line CheckDurability logs when durability
// replica cannot promise that a network partition loses no accepted order.
const PartitionWarning = "async: DURABILITY REPLICA DOES NOT SURVIVE NETWORK PARTITIONS"

// checkPartitions logs loudly when a network partition can lose orders
// durability replica accepted on this primary (docs/partitions.md): when
// --min-replicas is below the replicas it has (the Sentinels may promote
// one the WAIT did not count), and when min-replicas-to-write is below
// --min-replicas or unreadable (a primary cut off from its replicas goes
// on writing orders its consumers persist and a failover then drops).
func checkPartitions(ctx context.Context, node rueidis.Client, min, connected int, log *slog.Logger) {
	var why []string
	if min < connected {
		why = append(why, fmt.Sprintf("--min-replicas %d is below the %d replicas connected: a partition that leaves the primary "+
			"with the replicas that acknowledged an order lets the Sentinels promote one that lacks it", min, connected))
	}
	cfg, err := node.Do(ctx, node.B().ConfigGet().Parameter("min-replicas-*").Build()).AsStrMap()
	toWrite, _ := strconv.Atoi(cfg["min-replicas-to-write"])
	switch {
	case err != nil:
		why = append(why, fmt.Sprintf("min-replicas-to-write cannot be read (%v)", err))
	case toWrite < min:
		why = append(why, fmt.Sprintf("min-replicas-to-write is %d, below --min-replicas %d: a primary cut off from its replicas "+
			"goes on writing orders (refused to buyers) that its consumers may persist and a failover drops", toWrite, min))
	}
	if len(why) == 0 {
		log.Info("async: durability replica: a network partition loses no accepted order (every replica acknowledges it; "+
			"an isolated primary stops writing after min-replicas-max-lag)", "min_replicas", min, "min_replicas_max_lag", cfg["min-replicas-max-lag"])
		return
	}
	log.Warn(PartitionWarning+": "+strings.Join(why, "; ")+
		"; for the promise, set --min-replicas to the number of replicas and min-replicas-to-write to the same on every data node (see docs/partitions.md)",
		"min_replicas", min, "connected", connected)
}

// infoFields reads the "name:value" lines of an INFO reply.
func infoFields(text string) map[string]string {
	f := make(map[string]string)
	for line := range strings.SplitSeq(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f
}

// logLoaded logs that a voucher was loaded into Redis from MySQL. When the
// instance had sold it from Redis before, Redis lost its keys: a restart
// without the data, a failover to a replica without them, or a deletion.
// Orders accepted before and not persisted then are gone (the buyers may
// buy again; MySQL's stock keeps the sale from overselling), and neither
// Redis nor MySQL holds a trace of them: this line is the report.
func (s *Service) logLoaded(voucherID int64, remaining, orders int) {
	if _, sold := s.locals.Load(voucherID); sold {
		s.log.Error("async: ACCEPTED ORDERS LOST: a voucher this instance sold from was gone from Redis and was reloaded from MySQL; "+
			"orders accepted before and not persisted yet are lost unless its keys were deleted on purpose",
			"voucher", voucherID, "durability", s.cfg.Durability.Mode, "remaining", remaining, "orders", orders)
		return
	}
	s.log.Info("async: voucher loaded into Redis from MySQL", "voucher", voucherID, "remaining", remaining, "orders", orders)
}
