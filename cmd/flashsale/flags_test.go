package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCommandsRejectBadFlags: bad flag values and stray words fail before
// anything is opened, with an error naming the flag: usage errors (exit
// status 2).
func TestCommandsRejectBadFlags(t *testing.T) {
	servers := []string{"--redis", "redis://127.0.0.1:1/0", "--db", "mysql://root@127.0.0.1:1/x"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a stray word drops the flags after it", []string{"serve", "--strategy", "async", "--consume", "false", "--redis", "redis://127.0.0.1:6379/0"}, `unexpected argument "false"`},
		{"a stray word after token's flags", []string{"token", "--user", "1", "extra"}, `unexpected argument "extra"`},
		{"NaN rate limit", []string{"serve", "--rate-limit-ip", "NaN"}, "must be numbers"},
		{"no lock wait", []string{"serve", "--lock-wait", "0s"}, "--lock-wait and --shutdown-timeout must be positive"},
		{"serve: no delivery before dead-lettering", []string{"serve", "--strategy", "async", "--max-deliveries", "-1"}, "--max-deliveries must be at least 1"},
		{"serve: claim time shorter than a batch", []string{"serve", "--strategy", "async", "--claim-idle", "1ms"}, "--claim-idle must be at least 1s"},
		{"consume: a heartbeat a live consumer would miss", append([]string{"consume", "--heartbeat", "100ms"}, servers...), "--heartbeat must be at least 1s"},
		{"serve: negative gate wait", []string{"serve", "--strategy", "async", "--max-gate-wait", "-1ms"}, "--max-pending and --max-gate-wait must not be negative"},
		{"serve: negative shard linger", []string{"serve", "--strategy", "async", "--shard-linger", "-1ms"}, "--shard-linger must not be negative"},
		{"serve: negative batch", []string{"serve", "--strategy", "async", "--batch", "-5"}, "--batch must be at least 1"},
		{"serve: unknown durability", []string{"serve", "--strategy", "async", "--durability", "disk"}, "--durability must be memory, aof or replica"},
		{"serve: durability without async", []string{"serve", "--durability", "aof"}, "--durability applies to --strategy async"},
		{"serve: no replica to wait for", []string{"serve", "--strategy", "async", "--durability", "replica", "--min-replicas", "0"}, "--min-replicas must be at least 1"},
		{"consume on embedded backends", []string{"consume"}, "consume needs --redis and --db"},
		{"consume: empty batch", append([]string{"consume", "--batch", "0"}, servers...), "--batch must be at least 1"},
		{"consume: negative read linger", append([]string{"consume", "--read-linger", "-1ms"}, servers...), "--read-linger must be between 0 and 1s"},
		{"serve: read linger past a second", []string{"serve", "--strategy", "async", "--read-linger", "2s"}, "--read-linger must be between 0 and 1s"},
		{"reconcile on embedded backends", []string{"reconcile"}, "reconcile needs --redis and --db"},
		{"reconcile: negative voucher", append([]string{"reconcile", "--voucher", "-1"}, servers...), "--voucher must be a voucher id"},
		{"token already expired", []string{"token", "--jwt-secret", strings.Repeat("s", 32), "--user", "1", "--ttl", "-1h"}, "--ttl must be positive"},
		{"bench: no request timeout", []string{"bench", "--timeout", "-1s"}, "must be positive"},
		{"bench: NaN rate limit", []string{"bench", "--rate-limit-user", "NaN"}, "rate limits must not be negative"},
		{"bench: NaN rate", []string{"bench", "--rate", "NaN"}, "--rate must not be negative"},
		{"bench: NaN double clicks", []string{"bench", "--double-clicks", "NaN"}, "--double-clicks must be within [0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if _, usage := errors.AsType[*usageError](err); !usage || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v = %v; want a usage error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestTokenReachesTheLargestUserID: a range ending at the largest int64
// prints one token per id instead of wrapping around.
func TestTokenReachesTheLargestUserID(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"token", "--jwt-secret", strings.Repeat("s", 32), "--user", "9223372036854775806-9223372036854775807"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(stdout.String(), "\n"); lines != 2 {
		t.Fatalf("%d tokens printed, want 2:\n%s", lines, stdout.String())
	}
}

func TestRedactHidesPasswords(t *testing.T) {
	tests := []struct{ in, want string }{
		{"mysql://root:s3cret@127.0.0.1:3306/db", "mysql://root:xxxxx@127.0.0.1:3306/db"},
		{"redis://:s3cret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"root:s3cret@tcp(127.0.0.1:3306)/db", "…@tcp(127.0.0.1:3306)/db"},
		{"mysql:/root:s3cret@127.0.0.1:3306/db", "…@127.0.0.1:3306/db"},
		{"sqlite:///tmp/x.db", "sqlite:///tmp/x.db"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
