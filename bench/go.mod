module github.com/flashsale/flashsale/bench

go 1.26.8

replace github.com/flashsale/flashsale => ../

require (
	github.com/bsm/redislock v0.10.0
	github.com/flashsale/flashsale v0.0.0-00010101000000-000000000000
	github.com/go-redsync/redsync/v4 v4.17.0
	github.com/redis/go-redis/v9 v9.21.0
	github.com/redis/rueidis v1.0.79
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
