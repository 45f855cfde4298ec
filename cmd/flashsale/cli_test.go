package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestCLIExitCodes checks what the command line answers to help, unknown
// commands, versions and bad flag values: the exit status, and one line
// on stderr for an error in a command's flags.
func TestCLIExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string // contained
		stderr     string // contained
		errorLines int    // with stderr: the lines it must have, 0: any
	}{
		{"--help", []string{"--help"}, 0, "Usage: flashsale <command>", "", 0},
		{"-h", []string{"-h"}, 0, "Commands:", "", 0},
		{"a command's --help", []string{"serve", "--help"}, 0, "Usage: flashsale serve", "", 0},
		{"help", []string{"help"}, 0, "Usage: flashsale <command>", "", 0},
		{"help on a command", []string{"help", "bench"}, 0, "--wide=false", "", 0},
		{"help on an unknown command: one line", []string{"help", "sell"}, 2, "", `flashsale: unknown command "sell"; the commands are serve, consume, reconcile, token, jwks, bench, demo, help, version (see: flashsale help)`, 1},
		{"unknown command: one line", []string{"sell"}, 2, "", `flashsale: unknown command "sell"; the commands are serve, consume, reconcile, token, jwks, bench, demo, help, version (see: flashsale help)`, 1},
		{"no command: the usage", nil, 2, "", "flashsale: no command given\n\nUsage: flashsale <command>", 0},
		{"version", []string{"version"}, 0, runtime.Version(), "", 0},
		{"--version", []string{"--version"}, 0, runtime.Version(), "", 0},
		{"a bad flag value", []string{"serve", "--rate-limit-ip", "abc"}, 2, "", `flashsale serve: invalid value "abc" for flag --rate-limit-ip`, 1},
		{"a bad boolean", []string{"serve", "--consume=maybe"}, 2, "", `flashsale serve: invalid boolean value "maybe" for --consume`, 1},
		{"a flag without its value", []string{"serve", "--addr"}, 2, "", "flashsale serve: flag needs an argument: --addr", 1},
		{"an unknown flag, named as help names it", []string{"token", "--users", "3"}, 2, "", "flashsale token: unknown flag --users (see: flashsale help token)", 1},
		{"an unknown flag given with one dash", []string{"token", "-users", "3"}, 2, "", "flashsale token: unknown flag --users", 1},
		{"a bad duration", []string{"bench", "--timeout", "soon"}, 2, "", "flashsale bench: invalid value \"soon\" for flag --timeout", 1},
		{"a value the command refuses", []string{"serve", "--strategy", "fast"}, 2, "", "--strategy must be one of", 1},
		{"a stray word", []string{"token", "--user", "1", "extra"}, 2, "", `unexpected argument "extra"`, 1},
		// Checked before anything starts: no embedded backend logs a line.
		{"serve without a JWT secret", []string{"serve"}, 2, "", "flashsale serve: no JWT secret: set --jwt-secret, --jwt-secret-file or FLASHSALE_JWT_SECRET", 1},
		{"serve with a short JWT secret", []string{"serve", "--jwt-secret", "short"}, 2, "", "flashsale serve: auth: the JWT secret must be at least 32 bytes", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("flashsale %q: exit %d, want %d\nstdout (want %q):\n%s\nstderr (want %q):\n%s", tt.args, code, tt.code, tt.stdout, stdout.String(), tt.stderr, stderr.String())
			}
			if n := strings.Count(stderr.String(), "\n"); tt.errorLines > 0 && n != tt.errorLines {
				t.Errorf("flashsale %q: %d lines on stderr, want %d:\n%s", tt.args, n, tt.errorLines, stderr.String())
			}
			if code == 0 && stderr.Len() > 0 {
				t.Errorf("flashsale %q succeeded with stderr:\n%s", tt.args, stderr.String())
			}
			if out := stdout.String() + stderr.String(); strings.Contains(out, "help requested") || strings.Contains(out, "error parsing") {
				t.Errorf("flashsale %q prints the flag package's plumbing:\n%s", tt.args, out)
			}
		})
	}
}

// TestBinaryExitStatus runs the built binary: main turns run's outcome
// into the process's exit status, and the version names the Go release.
func TestBinaryExitStatus(t *testing.T) {
	bin := buildFlashsale(t)
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--help"}, 0, "Usage: flashsale <command>"},
		{[]string{"version"}, 0, "flashsale "},
		{[]string{"sell"}, 2, `unknown command "sell"`},
		{[]string{"demo", "--stock", "many"}, 2, `flashsale demo: invalid value "many" for flag --stock`},
		{[]string{"token", "--jwt-secret", "short", "--user", "1"}, 2, "flashsale token: "},
	}
	for _, tt := range tests {
		out, err := exec.Command(bin, tt.args...).CombinedOutput()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code || !strings.Contains(string(out), tt.out) {
			t.Errorf("flashsale %q: exit %d, want %d; output (want %q):\n%s", tt.args, code, tt.code, tt.out, out)
		}
	}
}

// TestHelpText: every command's help fits 80 columns, names each flag's
// FLASHSALE_* variable (demo reads none, and says so), and consume and
// reconcile offer no embedded backend they would refuse.
func TestHelpText(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "serve", "consume", "reconcile", "token", "jwks", "bench", "demo", "help", "version"} {
		stdout.Reset()
		args := []string{"help"}
		if name != "" {
			args = append(args, name)
		}
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("help %s: %v", name, err)
		}
		help := stdout.String()
		for _, line := range strings.Split(help, "\n") {
			if utf8.RuneCountInString(line) > helpWidth {
				t.Errorf("help %s: a line of %d columns: %q", name, utf8.RuneCountInString(line), line)
			}
		}
		if name == "" || name == "demo" || name == "help" || name == "version" {
			if strings.Contains(help, "[FLASHSALE_") {
				t.Errorf("help %s names environment variables it does not read:\n%s", name, help)
			}
			continue
		}
		for _, line := range strings.Split(help, "\n") {
			if flagName, ok := strings.CutPrefix(line, "  --"); ok {
				flagName, _, _ = strings.Cut(flagName, " ")
				flagName, _, _ = strings.Cut(flagName, "=")
				if !strings.Contains(help, "["+envName(flagName)+"]") {
					t.Errorf("help %s: --%s does not name %s", name, flagName, envName(flagName))
				}
			}
		}
		if (name == "consume" || name == "reconcile") && strings.Contains(help, "embedded") {
			t.Errorf("help %s offers an embedded backend it refuses:\n%s", name, help)
		}
	}
}

// TestCommandErrorsReadOnce: an error of the domain reads once, without
// "flashsale: flashsale: not_found:"; a Redis address given without its
// scheme is answered with the URL to write; a database that cannot be
// reached at start is not told to "try again shortly" (an HTTP answer).
func TestCommandErrorsReadOnce(t *testing.T) {
	_, prefix := testenv.Redis(t)
	redisURL := "redis://" + testenv.RedisAddr() + "/0"
	tests := []struct {
		name string
		args []string
		want string // the whole of stderr
		code int
	}{
		{"an unknown voucher", []string{"reconcile", "--voucher", "424242", "--redis", redisURL, "--redis-prefix", prefix, "--db", testenv.MySQLURL(t)},
			"flashsale: voucher 424242 not found\n", 1},
		{"a Redis address without its scheme", []string{"serve", "--redis", testenv.RedisAddr(), "--jwt-secret", serveSecret},
			"flashsale: --redis \"" + testenv.RedisAddr() + "\" is not a URL: write it as redis://" + testenv.RedisAddr() + "/0 (redis://host:port/db)\n", 1},
		{"a database that is down", []string{"serve", "--redis", redisURL, "--redis-prefix", prefix, "--db", "mysql://root@127.0.0.1:1/x", "--jwt-secret", serveSecret},
			"flashsale: --db: store: connect to mysql database \"x\": dial tcp 127.0.0.1:1: connect: connection refused\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), append(tt.args, "--log-level", "error"), &stdout, &stderr)
			if code != tt.code || stderr.String() != tt.want {
				t.Errorf("exit %d, stderr:\n%q\nwant exit %d, stderr:\n%q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}

// TestBuildLine: the version names the revision a build recorded, and says
// why there is none when the build recorded none.
func TestBuildLine(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"stamped", settings("vcs.revision", "0220549abc", "vcs.time", "2026-11-27T07:00:00Z", "vcs.modified", "false"),
			"flashsale v1.2.3, revision 0220549abc of 2026-11-27T07:00:00Z, go1.26.8"},
		{"stamped, modified", settings("vcs.revision", "0220549abc", "vcs.modified", "true"), "flashsale v1.2.3, revision 0220549abc (modified), go1.26.8"},
		{"not stamped", settings("-buildvcs", "false"),
			"flashsale v1.2.3, revision unknown: built without VCS stamping (-buildvcs=false or not in a git checkout), go1.26.8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: tt.settings}
			if got := buildLine(bi); got != tt.want {
				t.Errorf("buildLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHelpSaysWhatTheProgramDoes: the help's counts, defaults and lists
// are the program's own.
func TestHelpSaysWhatTheProgramDoes(t *testing.T) {
	tests := []struct {
		command   string
		want, not []string
	}{
		{"demo", []string{fmt.Sprintf("each of the %d strategies (%s)", len(strategies()), strings.Join(strategies(), ", "))},
			[]string{"\n  --redis ", "\n  --db "}}, // accepted only to be refused
		{"serve", []string{"--log-level info\n", "lab only, UNSAFE BY DESIGN (they oversell or undersell): naive, mutex, optimistic",
			"accepted until 5s past their exp", "the live dashboard at /dashboard (GET / leads there)"}, []string{"INFO"}},
		{"token", []string{"servers accept them 5s longer"}, nil},
		{"bench", []string{fmt.Sprintf("about %d characters wide", wideColumns), targetExample}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), []string{"help", tt.command}, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			help := stdout.String()
			for _, w := range tt.want {
				if !strings.Contains(strings.Join(strings.Fields(help), " "), strings.Join(strings.Fields(w), " ")) && !strings.Contains(help, w) {
					t.Errorf("help %s lacks %q:\n%s", tt.command, w, help)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(help, n) {
					t.Errorf("help %s shows %q:\n%s", tt.command, n, help)
				}
			}
		})
	}
}

// TestTargetExampleIsComplete: the --target example of help bench is a
// command line bench accepts.
func TestTargetExampleIsComplete(t *testing.T) {
	args := strings.Fields(strings.ReplaceAll(targetExample, "\\", ""))
	if !slices.Equal(args[:2], []string{"flashsale", "bench"}) {
		t.Fatalf("the example does not start with flashsale bench: %q", targetExample)
	}
	var cfg benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse(args[2:]); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("bench refuses its own example: %v", err)
	}
}
