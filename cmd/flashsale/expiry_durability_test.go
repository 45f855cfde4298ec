package main

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// What durability aof and replica promise for accepted orders they
// promise for returns: a return reported done survives the fault. These
// tests let orders expire and their units come back, then break Redis.

// expireUnder runs serve in the durability mode on f's Redis, sells
// expiryStock units with a payment window of two seconds, and strikes
// while they expire (before, when between is true, every return is done).
func expireUnder(t *testing.T, mode string, f redisFault, afterReturns bool) *saleRig {
	r := newSaleRig(t, testenv.MySQLURL(t))
	r.redisURL, r.redis = f.url, f.client
	r.extra = []string{"--durability", mode, "--replica-timeout", "1s"}
	srv := r.serve(true)
	r.createWindow(srv.URL, expiryStock, 2)
	r.sellAll(srv.URL, 1, expiryStock)
	db := r.openStore()
	if afterReturns {
		r.waitAudit(db, "every order expired and returned", 60*time.Second, func(a flashsale.Audit) bool {
			return a.Expired == expiryStock && a.ReturnsPending == 0
		})
	} else {
		r.waitAudit(db, "every order in MySQL", 60*time.Second, func(a flashsale.Audit) bool { return a.AwaitingPayment == expiryStock })
		time.Sleep(1500 * time.Millisecond) // strike about as they fall due
	}
	f.strike()
	f.recover()
	r.waitAudit(db, "every order expired and returned", 90*time.Second, func(a flashsale.Audit) bool {
		return a.Expired == expiryStock && a.ReturnsPending == 0
	})
	return r
}

// TestReturnsSurviveAOFRedisKilled: durability aof; every return done,
// redis-server is SIGKILLed and restarted on its AOF: the units are still
// back, once.
func TestReturnsSurviveAOFRedisKilled(t *testing.T) {
	r := expireUnder(t, "aof", killedRedis(t, testenv.WithAOF()), true)
	r.waitRedisStock(expiryStock, 30*time.Second)
	srv := r.serve(true)
	r.resell(srv.URL, r.openStore(), expiryStock)
}

// TestReturnsSurviveReplicaFailover: durability replica; the orders
// expire while the replica lags and the primary is SIGKILLed (see
// failedOver). A return is done only once the replicas have it, so those
// the new primary lacks are still pending, and are finished on it: every
// unit back, once.
func TestReturnsSurviveReplicaFailover(t *testing.T) {
	r := expireUnder(t, "replica", failedOver(t), false)
	r.waitRedisStock(expiryStock, 30*time.Second)
	srv := r.serve(true)
	r.resell(srv.URL, r.openStore(), expiryStock)
}

// TestReturnsInMemoryFailover: durability memory promises nothing for
// returns either: the failover to a lagging replica may take some back.
// Those units are not sold twice — they are held, not sold — and
// reconcile finds and finishes the returns the new primary lacks.
func TestReturnsInMemoryFailover(t *testing.T) {
	r := expireUnder(t, "memory", failedOver(t), false)
	out, err := r.command("reconcile", "--fix").CombinedOutput()
	if err != nil {
		t.Fatalf("reconcile --fix: %v\n%s", err, out)
	}
	t.Logf("reconcile --fix:\n%s", out)
	r.waitRedisStock(expiryStock, 30*time.Second)
	srv := r.serve(true)
	r.resell(srv.URL, r.openStore(), expiryStock)
}
