// Package admission is a voucher's waiting room: buyers join a queue in
// Redis, are admitted at the voucher's admit_per_second (in random order
// for those who joined before the sale began, first come after them), and
// each admitted buyer gets a signed, single-use purchase pass that a queue
// voucher's order must carry. It also keeps the deny list of users and
// addresses. The design, and what each key holds: docs/admission.md.
package admission

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/groupcommit"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/vouchercache"
)

var (
	//go:embed join.lua
	joinSrc    string
	joinScript = luascript.New(joinSrc)
	//go:embed poll.lua
	pollSrc    string
	pollScript = luascript.NewReadOnly(pollSrc)
	//go:embed admit.lua
	admitSrc    string
	admitScript = luascript.New(admitSrc)
	//go:embed claim.lua
	claimSrc    string
	claimScript = luascript.New(claimSrc)
	//go:embed settle.lua
	settleSrc    string
	settleScript = luascript.New(settleSrc)
)

// VoucherReader reads a voucher's row; store.Queries.Voucher is one (a
// primary key read). Admission reads each voucher once per process: its
// admission mode, rate and sale window never change.
type VoucherReader interface {
	Voucher(ctx context.Context, id int64) (*flashsale.Voucher, error)
}

// UnitsLeft returns how many units of a voucher could still be bought
// (the gate's stock for async, MySQL's remaining for the others).
type UnitsLeft func(ctx context.Context, voucherID int64) (int, error)

// Config configures a Queue. Secret and Vouchers are required; Units is
// required to admit (Run).
type Config struct {
	// Prefix starts every key (default "flashsale:").
	Prefix string
	// Secret signs tickets and passes (at least 32 bytes); every instance
	// needs the same one.
	Secret   []byte
	Vouchers VoucherReader
	Units    UnitsLeft
	// PassTTL is how long a pass is valid (default 60s).
	PassTTL time.Duration
	// AdmitEvery is how often Run admits (default 100ms).
	AdmitEvery time.Duration
	Logger     *slog.Logger
}

// Queue is the waiting rooms of every queue voucher, and the deny list.
// It is safe for concurrent use, by many instances on one Redis.
type Queue struct {
	client rueidis.Client
	cfg    Config
	keys   keys
	macKey []byte

	rows       *vouchercache.Cache            // vouchers' rows (config.go)
	registered sync.Map                       // voucher id → when this process last added it to the rooms
	lanes      groupcommit.Map[string, *call] // the batches of joins and polls in flight (batch.go)
	macs       sync.Pool                      // HMACs keyed with macKey (token.go)
	final      soldOut                        // tickets that read sold_out (queue.go)
	deny       denyCache
}

// voucherConfig is what admission needs of a voucher: all immutable.
type voucherConfig struct {
	queued     bool
	rate       int
	begin, end time.Time
}

// New returns a Queue on client.
func New(client rueidis.Client, cfg Config) (*Queue, error) {
	if len(cfg.Secret) < 32 {
		return nil, errors.New("admission: the secret must be at least 32 bytes")
	}
	if cfg.Vouchers == nil {
		return nil, errors.New("admission: a VoucherReader is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "flashsale:"
	}
	if cfg.PassTTL <= 0 {
		cfg.PassTTL = 60 * time.Second
	}
	if cfg.AdmitEvery <= 0 {
		cfg.AdmitEvery = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	q := &Queue{client: client, cfg: cfg, keys: keys{prefix: cfg.Prefix}, macKey: deriveKey(cfg.Secret)}
	q.rows = vouchercache.New(q.loadVoucher, maxCached)
	return q, nil
}

// keys names the Redis keys; every key of one voucher's room is under the
// hash tag {q<id>}, so each script runs on one Redis Cluster slot.
type keys struct{ prefix string }

// room is one voucher's keys, in the order the scripts take them.
type room struct {
	waiting, passes, expiries, claims, done, meta, log string
}

// config is the key of a voucher's admission configuration, kept for
// reading it while MySQL does not answer.
func (k keys) config(voucherID int64) string {
	return k.prefix + "{q" + strconv.FormatInt(voucherID, 10) + "}:v"
}

func (k keys) room(voucherID int64) room {
	p := k.prefix + "{q" + strconv.FormatInt(voucherID, 10) + "}:"
	return room{p + "w", p + "p", p + "x", p + "c", p + "d", p + "m", p + "l"}
}

// rooms is the set of voucher ids with a waiting room, which Run admits.
func (k keys) rooms() string { return k.prefix + "queues" }

// denyList is the deny list's key.
func (k keys) denyList() string { return k.prefix + "denylist" }

func unavailable(what string, err error) error {
	return fmt.Errorf("%w: admission: %s: %w", &flashsale.Error{Code: flashsale.EUnavailable, Message: "the waiting room is unavailable; try again shortly", RetryAfter: time.Second}, what, err)
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// rueidisNil reports whether err is Redis's nil answer (a script's false).
func rueidisNil(err error) bool { return rueidis.IsRedisNil(err) }
