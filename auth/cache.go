package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"
)

// Bounds of the caches: TokenCacheSize verified tokens, SubjectCacheSize
// subjects' buyer ids (docs/benchmarks.md, issue 36, for their memory).
const (
	TokenCacheSize   = 1 << 20
	SubjectCacheSize = 1 << 18
)

// cacheShards is how many independently locked parts a cache has: a new
// buyer's token takes one shard's lock, not the whole cache's.
const cacheShards = 64

// tokenKey is what the token cache keys a token by: 128 bits of its
// SHA-256, so an entry costs 16 bytes whatever the token's length. Another
// token with a cached token's key is a second preimage of SHA-256/128.
type tokenKey [16]byte

func keyOf(token string) tokenKey {
	var buf [4096]byte // on the stack: []byte(token) of over 32 bytes allocates
	b := buf[:0]
	if len(token) <= len(buf) {
		b = append(b, token...)
	} else {
		b = []byte(token)
	}
	sum := sha256.Sum256(b)
	return tokenKey(sum[:16])
}

// tokenCache remembers the user tokens User verified, so the repeated
// requests of one buyer (a flash sale's clicks) skip the parsing,
// signature and buyer lookup. A hit is a token whose hash is that of a
// token that passed verification before, looked up before it expires: it
// says nothing a new verification would not.
type tokenCache struct {
	shards [cacheShards]cacheShard[tokenKey]
}

// cacheShard is one locked part of a cache: at most max entries; when
// full, an arbitrary one makes room (Go's map order is random).
type cacheShard[K comparable] struct {
	mu sync.RWMutex
	m  map[K]cachedUser
}

// cachedUser is a user and when the cache stops answering for it
// (Unix nanoseconds; the largest int64 for never).
type cachedUser struct {
	user  int64
	until int64
}

func (s *cacheShard[K]) get(k K, now int64) (int64, bool) {
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	if !ok || now >= e.until {
		return 0, false
	}
	return e.user, true
}

func (s *cacheShard[K]) put(k K, e cachedUser, max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[K]cachedUser)
	}
	if _, ok := s.m[k]; !ok && len(s.m) >= max {
		for old := range s.m { // map order is random: evict one at random
			delete(s.m, old)
			break
		}
	}
	s.m[k] = e
}

func (s *cacheShard[K]) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// shard is where a key lives: its first bytes are SHA-256's, uniform.
func (c *tokenCache) shard(k tokenKey) *cacheShard[tokenKey] {
	return &c.shards[binary.LittleEndian.Uint64(k[:8])%cacheShards]
}

// get returns the user of a token verified before, if it is still valid
// at now.
func (c *tokenCache) get(k tokenKey, now time.Time) (int64, bool) {
	return c.shard(k).get(k, now.UnixNano())
}

// put remembers a verified token until the given time.
func (c *tokenCache) put(k tokenKey, user int64, until time.Time) {
	c.shard(k).put(k, cachedUser{user: user, until: until.UnixNano()}, TokenCacheSize/cacheShards)
}

// size is how many tokens the cache holds.
func (c *tokenCache) size() int {
	n := 0
	for i := range c.shards {
		n += c.shards[i].len()
	}
	return n
}

// subjectCache remembers the buyer ids of (issuer, subject) pairs, which
// never change once allocated. It is keyed by the pair itself, not a
// hash of it: a hit is exactly the pair the store answered for.
type subjectCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard[subjectKey]
}

type subjectKey struct{ issuer, subject string }

func newSubjectCache() *subjectCache { return &subjectCache{seed: maphash.MakeSeed()} }

func (c *subjectCache) shard(k subjectKey) *cacheShard[subjectKey] {
	return &c.shards[maphash.Comparable(c.seed, k)%cacheShards]
}

func (c *subjectCache) get(k subjectKey) (int64, bool) { return c.shard(k).get(k, 0) }

func (c *subjectCache) put(k subjectKey, user int64) {
	c.shard(k).put(k, cachedUser{user: user, until: 1<<63 - 1}, SubjectCacheSize/cacheShards)
}
