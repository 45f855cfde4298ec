package auth

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// verifications are the provider's tokens being verified now, so that
// the clicks of a buyer that arrive together, with a token not cached
// yet, check it once: the first checks it (signature, claims, buyer id),
// the others wait for its answer. HS256 tokens of UserToken's header do
// not take it: they verify in about a microsecond, less than a wait.
type verifications struct {
	shards [cacheShards]verificationShard
}

type verificationShard struct {
	mu sync.Mutex
	m  map[tokenKey]*verification
}

// verification is one token's check: g and err are set before done
// closes. waiting counts the callers waiting for it.
type verification struct {
	done    chan struct{}
	g       grant
	err     error
	waiting atomic.Int32
}

func (v *verifications) shard(k tokenKey) *verificationShard {
	return &v.shards[binary.LittleEndian.Uint64(k[:8])%cacheShards]
}

// once returns check's answer for the token whose key is k: check runs
// now, or the run of another caller already under way answers. An answer
// that says only that the other caller's request ended (its ctx) is not
// this caller's: it then runs check itself. A caller whose ctx ends while
// it waits gets the buyer error, as while its buyer is being numbered.
func (v *verifications) once(ctx context.Context, k tokenKey, check func() (grant, error)) (grant, error) {
	s := v.shard(k)
	s.mu.Lock()
	if f, ok := s.m[k]; ok {
		s.mu.Unlock()
		f.waiting.Add(1)
		defer f.waiting.Add(-1)
		select {
		case <-f.done:
			if !ended(f.err) {
				return f.g, f.err
			}
			return check()
		case <-ctx.Done():
			return grant{}, fmt.Errorf("%w: %w", errBuyer, ctx.Err())
		}
	}
	if s.m == nil {
		s.m = make(map[tokenKey]*verification)
	}
	// Refused until check answers: a check that panics answers no waiter
	// with a grant.
	f := &verification{done: make(chan struct{}), err: errInvalid}
	s.m[k] = f
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.m, k)
		s.mu.Unlock()
		close(f.done)
	}()
	f.g, f.err = check()
	return f.g, f.err
}

// ended reports whether err says only that a caller's ctx ended.
func ended(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
