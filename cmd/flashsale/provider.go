package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/auth"
)

func registerProvider(fs *flag.FlagSet, p *auth.ProviderFlags) {
	fs.StringVar(&p.OIDCIssuer, "oidc-issuer", "", "accept buyers' tokens from this OpenID Connect issuer, its keys found by discovery (with --token-audience)")
	fs.StringVar(&p.JWKSURL, "jwks-url", "", "accept buyers' tokens signed with the keys at this JWKS URL (with --token-issuer and --token-audience)")
	fs.StringVar(&p.TokenIssuer, "token-issuer", "", "the iss of the tokens --jwks-url's keys sign")
	fs.StringVar(&p.Audience, "token-audience", "", "the aud a provider's token must name (required with --oidc-issuer or --jwks-url)")
	fs.StringVar(&p.UserClaim, "user-claim", "sub", "the claim of a provider's token that names the buyer")
}

// useProvider makes authn take cfg's provider, if any, until obs stops.
func useProvider(cfg serveConfig, authn *auth.Authenticator, b *backends, obs *observer, log *slog.Logger) error {
	obs.m.WatchAuth(authn)
	p, ok, _ := cfg.provider.Provider() // validated
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := obs.stop
	obs.stop = func() { cancel(); stop() }
	p.Log = log
	return authn.UseProvider(ctx, p, b.db)
}

func jwksCommand(stdout io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("flashsale jwks", flag.ContinueOnError)
	var keys []*auth.SigningKey
	fs.Func("key", "a PEM private key file (RSA, P-256 or Ed25519); repeat for a rotation's old and new keys", func(path string) error {
		k, err := auth.ReadSigningKey(path, "")
		keys = append(keys, k)
		return err
	})
	return &ffcli.Command{
		Name: "jwks", ShortUsage: "flashsale jwks --key FILE [--key FILE]", FlagSet: fs, Options: envOptions(),
		ShortHelp: "print the JWKS of the keys flashsale token --key signs with",
		Exec: noArgs(func(context.Context) error {
			b, err := auth.JWKS(keys...)
			if err == nil {
				_, err = fmt.Fprintf(stdout, "%s\n", b)
			}
			return err
		}),
	}
}
