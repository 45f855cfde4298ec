package async

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
)

// Order pointers tell FindOrder which voucher and user an order id belongs
// to while the order is not in MySQL yet. gate.lua writes them with the
// order: an order id carries its shard's slot, so its bucket is in the
// slot of the shard's other keys (layout.Pointer). A bucket is a hash of
// the orders whose ids were allocated in the same 16 seconds for the same
// slot, so FindOrder finds it from the id alone, in one command; it
// expires PointerTTL after its last write. (Ids without a slot, from
// versions before issue 34, have no pointer: drain before you upgrade.)

// pointer is what an order's pointer says: its voucher, user and stream
// entry.
type pointer struct {
	voucher, user int64
	entry         string
}

// findPointer returns an order's pointer, or ENotFound when there is none.
func (s *Service) findPointer(ctx context.Context, id int64) (pointer, error) {
	key, field := s.keys.Pointer(id)
	if key == "" { // a plain id: nothing points to it
		return pointer{}, flashsale.Errorf(flashsale.ENotFound, "order %d not found", id)
	}
	val, err := s.client.Do(ctx, s.client.B().Hget().Key(key).Field(field).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return pointer{}, flashsale.Errorf(flashsale.ENotFound, "order %d not found", id)
	}
	if err != nil {
		return pointer{}, unavailable(fmt.Sprintf("find order %d", id), err)
	}
	p, err := parsePointer(val)
	if err != nil {
		return pointer{}, fmt.Errorf("async: pointer of order %d: %w", id, err)
	}
	return p, nil
}

// parsePointer reads an order pointer, "<voucher>:<user>:<entry id>".
func parsePointer(val string) (pointer, error) {
	parts := strings.SplitN(val, ":", 3)
	if len(parts) != 3 {
		return pointer{}, fmt.Errorf("%q is not voucher:user:entry", val)
	}
	var p pointer
	var err error
	if p.voucher, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return pointer{}, err
	}
	if p.user, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
		return pointer{}, err
	}
	p.entry = parts[2]
	return p, nil
}
