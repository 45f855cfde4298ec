// Package lock is a distributed lock on Redis: a fair, reentrant mutex with
// owner tokens, fencing tokens and leases kept alive by a watchdog, a
// readers-writer lock, a counting semaphore, and a lock over several
// masters.
//
//	locks := lock.New(rueidisClient)               // one per process
//	l, err := locks.Mutex("order:42").Lock(ctx)    // waits; TryLock does not
//	if err != nil { ... }
//	defer l.Unlock(context.Background())
//	work(l.Context(), l.Fence())                   // l.Context ends if the lock is lost
//
// All keys of one lock name share one hash tag and every script names the
// keys it touches, so a lock works on Redis Cluster, on the master that
// owns its name's slot.
//
// # Guarantees
//
// While its lease lasts, a lock has one holder. Each acquisition has its own
// owner token (Lock.Token); Unlock, Extend and Reenter by a handle that was
// released, or whose lease ran out, return ErrNotHeld and change nobody
// else's hold. A holder that loses its lock (a renewal found it gone, or
// could not reach Redis before the lease ran out) is told: Lock.Lost is
// closed and Lock.Context is cancelled with cause ErrLost.
//
// No lease-based lock can stop a holder that was paused past its lease (GC,
// swap, a slow call) from acting as if it still held the lock, and Redis
// replication is asynchronous, so a failover can lose a lock. Fencing tokens
// (Lock.Fence) protect against both: they strictly increase per lock name
// in the order the lock is held, and a resource that refuses tokens lower
// than the highest it has seen refuses the stale holder.
//
// By default a watchdog renews the lease (10s) every lease/3 while the lock
// is held, so a holder that dies frees the lock at most a lease later;
// WithLease gives a fixed lease instead. A waiter that is handed the lock
// after its process died holds it up for at most WithHandoffLease (2s).
//
// Locks are reentrant through the handle (Lock.Reenter) or through a context
// that carries it (Lock.Context): each hold needs its own Unlock, and only
// the last one releases.
//
// # Contexts
//
// Lock, TryLock, Unlock, Extend and Reenter of every type return within
// 200ms of the end of their context, with ctx.Err(), even if Redis is dead
// or stopped: a script sent before the end is waited for 100ms more, then
// given up, and nothing is sent after the end. What a given-up script may
// still do in Redis is undone by a cancel or a release, or expires (a
// grant with its lease, a queue entry with its queue), so another Client
// gets the lock at most a lease after Redis is back. The bound needs no
// option on the rueidis client. One window is wider: a call made within
// 10ms of the moment Redis stalls, while its connection must be dialled
// again, can wait for rueidis's dial timeout (5s by default). Calls on one
// handle are serialised, so one may first wait for another made with a
// longer context. A context with neither deadline nor cancellation waits
// for Redis as long as it takes.
//
// # Failover
//
// Without WithReplicas, a failover can promote a replica that had not yet
// received an acquisition: the lock is then free on the new primary while
// its holder still believes it holds it, and the fencing tokens of that
// acquisition may be issued again.
//
// # Several masters
//
// NewMulti(clients...).Mutex(name) is one lock over several independent
// Redis masters: a MultiLock is held only while the lock is held on every
// one of them (not a majority: Redlock is not what it does), and is lost
// as soon as any part is.
//
// # Fairness
//
// Waiters are served in turns: Clients in the order they queued in Redis,
// and the goroutines of one Client in the order they called Lock. Within a
// Client's turn, which lasts at most WithTurnDuration (2ms), the lock passes
// between its goroutines without a Redis call. Every goroutine gets one
// acquisition per round, so nobody starves. RWMutex and Semaphore have no
// turns: their waiters are served in the order they queued in Redis, so a
// reader never overtakes a waiting writer.
//
// # Keys
//
// Lock N uses the keys <prefix>{N} (hash), <prefix>{N}:q (wait queue) and
// <prefix>{N}:f (last fencing token), and publishes grants on
// <prefix>ch:<client id>; WithReplicas writes <prefix>{N}:w (10s) before
// each WAIT. Idle locks leave only the fence key, which expires
// at most the fence retention (24h, WithFenceRetention) after it was set.
// RWMutex and Semaphore N use <prefix>{N}:rw… and <prefix>{N}:sem…, apart
// from Mutex N's; a Semaphore's number of permits, <prefix>{N}:sem:n, is
// kept until deleted.
//
// How the lock works (turns, queues, handoffs, fencing-token blocks) is in
// DESIGN.md beside this file; README.md says what it offers and how it
// compares.
package lock
