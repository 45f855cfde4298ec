package auth

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTokenCacheBounded: the cache keeps at most TokenCacheSize tokens,
// and a token is answered until its time only.
func TestTokenCacheBounded(t *testing.T) {
	var c tokenCache
	now := time.Now()
	for i := range TokenCacheSize + TokenCacheSize/4 {
		c.put(keyOf(strconv.Itoa(i)), int64(i), now.Add(time.Minute))
	}
	if n := c.size(); n > TokenCacheSize || n < TokenCacheSize*9/10 {
		t.Fatalf("%d tokens cached; want at most %d (and about as many)", n, TokenCacheSize)
	}
	k := keyOf("last")
	c.put(k, 42, now.Add(time.Second))
	if id, ok := c.get(k, now); !ok || id != 42 {
		t.Fatalf("get = %d, %v; want 42", id, ok)
	}
	if _, ok := c.get(k, now.Add(time.Second)); ok {
		t.Fatal("a token answered at its expiry")
	}
}

// BenchmarkTokenCachePut is the path of every new buyer's token: put (and
// a get that misses first) from all Ps at once, in the sharded cache and in
// the one-mutex cache it replaced (issue 34: 7.7% of CPU on 16 cores).
func BenchmarkTokenCachePut(b *testing.B) {
	until := time.Now().Add(time.Hour)
	var seq atomic.Int64
	b.Run("sharded", func(b *testing.B) {
		var c tokenCache
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := keyOf(strconv.FormatInt(seq.Add(1), 10))
				if _, ok := c.get(k, time.Now()); !ok {
					c.put(k, 1, until)
				}
			}
		})
	})
	b.Run("one-mutex", func(b *testing.B) {
		var c oneMutexCache
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tok := strconv.FormatInt(seq.Add(1), 10)
				if _, ok := c.get(tok, time.Now()); !ok {
					c.put(tok, 1, until)
				}
			}
		})
	})
}

// oneMutexCache is the token cache before issue 36 (main at 241ad36).
type oneMutexCache struct {
	mu sync.RWMutex
	m  map[string]cachedToken
}

type cachedToken struct {
	user  int64
	until time.Time
}

func (c *oneMutexCache) get(token string, now time.Time) (int64, bool) {
	c.mu.RLock()
	e, ok := c.m[token]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return 0, false
	}
	return e.user, true
}

func (c *oneMutexCache) put(token string, user int64, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedToken)
	}
	if len(c.m) >= 1<<16 {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[token] = cachedToken{user: user, until: until}
}

// BenchmarkCacheMemory fills the caches with 1,000,000 distinct buyers'
// tokens and subjects and reports the heap they hold: the token cache
// keeps them all (bounded at TokenCacheSize), the subject cache its bound
// (SubjectCacheSize) of 36-byte subjects.
func BenchmarkCacheMemory(b *testing.B) {
	const buyers = 1_000_000
	until := time.Now().Add(time.Hour)
	for b.Loop() {
		before := heap()
		var c tokenCache
		for i := range buyers {
			c.put(keyOf("token of buyer "+strconv.Itoa(i)), int64(i), until)
		}
		mid := heap()
		s := newSubjectCache()
		for i := range buyers {
			s.put(subjectKey{"https://id.example.com/realms/shop", "2f6c1c62-8c0e-4d6e-9a4b-" + strconv.Itoa(100000000000+i)}, int64(i))
		}
		after := heap()
		b.ReportMetric(float64(mid-before)/1e6, "token-cache-MB")
		b.ReportMetric(float64(c.size()), "tokens")
		b.ReportMetric(float64(after-mid)/1e6, "subject-cache-MB")
		b.ReportMetric(float64(s.size()), "subjects")
		runtime.KeepAlive(&c)
		runtime.KeepAlive(s)
	}
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkProviderUser is User of a provider's token never seen before
// (its buyer known: the subject cache answers), per alg, beside HS256's
// in-house path and a cached token: what a buyer's first click costs
// the server's CPU, and what the next four cost.
func BenchmarkProviderUser(b *testing.B) {
	k := testKeys()
	p := newTestProvider(b, k["rs"], k["ps"], k["es"], k["ed"])
	a := providerAuth(b, p, testBuyerStore(b))
	for _, name := range []string{"hs", "rs", "ps", "es", "ed"} {
		tokens := make([]string, benchTokens)
		for i := range tokens {
			if name == "hs" {
				tokens[i], _ = a.UserToken(int64(i+1), time.Hour)
				continue
			}
			c := claims(p, "buyer-"+strconv.Itoa(i%16))
			c["jti"] = strconv.Itoa(i)
			tokens[i] = mustSign(b, k[name], c)
		}
		alg := map[string]string{"hs": "HS256", "rs": "RS256", "ps": "PS256", "es": "ES256", "ed": "EdDSA"}[name]
		b.Run(alg+"/new", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%benchTokens == 0 {
					a.cache = tokenCache{}
				}
				if _, err := a.User(tokens[i%benchTokens]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg+"/cached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.User(tokens[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
