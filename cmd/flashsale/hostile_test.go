package main

import (
	"strings"
	"testing"
)

// TestInstanceProcessesHoldNoSecretOnTheirCommandLine: the bench's child
// instances get the JWT secret, the admin token and the backends' URLs
// (which may hold passwords) in their environment; their command lines,
// which ps and /debug/pprof/cmdline show, hold none of them.
func TestInstanceProcessesHoldNoSecretOnTheirCommandLine(t *testing.T) {
	fl := &fleets{secret: "jwt-secret-jwt-secret-jwt-secret-x", admin: "admin-token-admin-token-admin-token",
		b: &backends{redisURL: "redis://:redispass@127.0.0.1:6379/0", dbURL: "mysql://root:dbpass@127.0.0.1:3306/x", prefix: "lab:"}}
	args, env := fl.processArgs("async")
	line := strings.Join(args, " ")
	for _, secret := range []string{fl.secret, fl.admin, "redispass", "dbpass"} {
		if strings.Contains(line, secret) {
			t.Fatalf("the command line %q holds a secret %q", line, secret)
		}
		if !strings.Contains(strings.Join(env, "\n"), secret) {
			t.Fatalf("the environment lacks %q", secret)
		}
	}
}
