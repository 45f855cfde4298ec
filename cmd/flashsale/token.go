package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
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
	var p providerToken
	fs.StringVar(&p.key, "key", "", "sign as an identity provider with this PEM private key (RSA: RS256, P-256: ES256, Ed25519: EdDSA) instead of --jwt-secret; flashsale jwks prints its JWKS")
	fs.StringVar(&p.issuer, "issuer", "", "with --key: the tokens' iss (serve's --token-issuer)")
	fs.StringVar(&p.audience, "audience", "flashsale", "with --key: the tokens' aud (serve's --token-audience)")
	fs.StringVar(&p.subject, "subject", "", "with --key: one token for this subject (a string), instead of --user's numbers as subjects")
	return &ffcli.Command{
		Name:       "token",
		ShortUsage: "flashsale token (--jwt-secret S | --jwt-secret-file F) --user 42|1-1000\n       flashsale token --key FILE --issuer URL (--subject S | --user 1-1000)",
		ShortHelp:  "print user tokens for testing",
		FlagSet:    fs,
		Options:    envOptions(),
		Exec: noArgs(func(context.Context) error {
			if p.key != "" {
				return p.print(stdout, *user, *ttl)
			}
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

// providerToken is token --key: tokens as an identity provider signs them.
type providerToken struct{ key, issuer, audience, subject string }

func (p providerToken) print(stdout io.Writer, users string, ttl time.Duration) error {
	k, err := auth.ReadSigningKey(p.key, "")
	first, last := int64(0), int64(0)
	if p.subject == "" && err == nil {
		first, last, err = parseUserRange(users)
	}
	if err != nil || p.issuer == "" || ttl <= 0 {
		return usage(cmp.Or(err, errors.New("--key needs --issuer and a positive --ttl")))
	}
	w := bufio.NewWriter(stdout)
	for id := first; id <= last && id >= 0; id++ { // once for --subject
		tok, err := k.ProviderToken(p.issuer, p.audience, cmp.Or(p.subject, strconv.FormatInt(id, 10)), ttl)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, tok)
	}
	return w.Flush()
}
