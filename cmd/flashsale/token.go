package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/auth"
)

func tokenCommand(stdout io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("flashsale token", flag.ContinueOnError)
	var secret jwtSecretFlags
	secret.register(fs, "HS256 secret the server verifies tokens with")
	user := fs.String("user", "", "a user id (42) or an inclusive range (1-1000); one token per line")
	ttl := fs.Duration("ttl", 24*time.Hour, fmt.Sprintf("how long the tokens are valid (servers accept them %s longer, for clocks that differ)", auth.Leeway))
	return &ffcli.Command{
		Name:       "token",
		ShortUsage: "flashsale token (--jwt-secret S | --jwt-secret-file F) --user 42|1-1000",
		ShortHelp:  "print user tokens for testing",
		FlagSet:    fs,
		Options:    envOptions(),
		Exec: noArgs(func(context.Context) error {
			s, err := secret.value()
			if err != nil {
				return usage(err)
			}
			a, err := auth.New(s, "")
			if err != nil {
				return usage(err)
			}
			first, last, err := parseUserRange(*user)
			if err != nil {
				return usage(err)
			}
			if *ttl <= 0 {
				return usage(fmt.Errorf("--ttl must be positive, got %v", *ttl))
			}
			w := bufio.NewWriter(stdout)
			for id := first; ; id++ { // up to last, which may be the largest int64
				tok, err := a.UserToken(id, *ttl)
				if err != nil {
					return err
				}
				fmt.Fprintln(w, tok)
				if id == last {
					break
				}
			}
			return w.Flush()
		}),
	}
}

// parseUserRange parses "42" or "1-1000" into an inclusive range of
// positive user ids.
func parseUserRange(s string) (first, last int64, err error) {
	lo, hi, isRange := strings.Cut(s, "-")
	first, err = strconv.ParseInt(lo, 10, 64)
	if err == nil && isRange {
		last, err = strconv.ParseInt(hi, 10, 64)
	} else {
		last = first
	}
	if err != nil || first <= 0 || last < first {
		return 0, 0, fmt.Errorf("--user must be a positive user id or a range like 1-1000, got %q", s)
	}
	if last-first >= 10_000_000 {
		return 0, 0, fmt.Errorf("--user range %q is larger than 10,000,000 users", s)
	}
	return first, last, nil
}
