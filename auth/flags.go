package auth

import "errors"

// ProviderFlags are serve's flags that name an identity provider:
// --oidc-issuer, or --jwks-url with --token-issuer; --token-audience with
// either; --user-claim.
type ProviderFlags struct {
	OIDCIssuer, JWKSURL, TokenIssuer, Audience, UserClaim string
}

// Provider checks the flags and returns the provider they name; false
// when they name none.
func (f ProviderFlags) Provider() (Provider, bool, error) {
	switch {
	case f.OIDCIssuer != "" && (f.JWKSURL != "" || f.TokenIssuer != ""):
		return Provider{}, false, errors.New("--oidc-issuer finds its keys by discovery: give it without --jwks-url and --token-issuer")
	case (f.JWKSURL == "") != (f.TokenIssuer == ""):
		return Provider{}, false, errors.New("--jwks-url and --token-issuer go together")
	case (f.OIDCIssuer != "" || f.JWKSURL != "") != (f.Audience != ""):
		return Provider{}, false, errors.New("--token-audience is required with --oidc-issuer or --jwks-url, and only with them")
	case f.UserClaim == "":
		return Provider{}, false, errors.New("--user-claim must name a claim")
	}
	p := Provider{Issuer: f.OIDCIssuer + f.TokenIssuer, JWKSURL: f.JWKSURL, Audience: f.Audience, UserClaim: f.UserClaim}
	return p, p.Issuer != "", nil
}
