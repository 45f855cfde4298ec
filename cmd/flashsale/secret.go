package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/secretfile"
)

// jwtSecretFlags are --jwt-secret and --jwt-secret-file. The file lets
// serve, token and bench read one secret without it being exported into
// every shell (a variable exported in one terminal is not in another), or
// shown on a command line.
type jwtSecretFlags struct {
	secret string
	file   string
}

func (f *jwtSecretFlags) register(fs *flag.FlagSet, help string) {
	fs.StringVar(&f.secret, "jwt-secret", "", help+" (at least 32 bytes; prefer --jwt-secret-file: a command line is visible to other users)")
	fs.StringVar(&f.file, "jwt-secret-file", "", "read --jwt-secret from this file (surrounding whitespace dropped)")
}

// value returns the secret given directly or read from the file.
func (f *jwtSecretFlags) value() (string, error) {
	switch {
	case f.file == "":
		return f.secret, nil
	case f.secret != "":
		return "", errors.New("give --jwt-secret or --jwt-secret-file, not both")
	}
	return secretfile.Read("--jwt-secret-file", f.file, false)
}

// adminTokenFlags are --admin-token and --admin-token-file: the bearer
// token of the admin routes, at least auth.MinAdminTokenLen bytes.
type adminTokenFlags struct {
	token string
	file  string
}

func (f *adminTokenFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.token, "admin-token", "", fmt.Sprintf("bearer token for admin routes (creating vouchers), at least %d bytes; prefer --admin-token-file or FLASHSALE_ADMIN_TOKEN: a command line is visible to other users", auth.MinAdminTokenLen))
	fs.StringVar(&f.file, "admin-token-file", "", "read --admin-token from this file (surrounding whitespace dropped; make it with umask 077)")
}

// value returns the admin token given directly or read from the file,
// "" for none.
func (f *adminTokenFlags) value() (string, error) {
	tok := f.token
	switch {
	case f.file != "" && tok != "":
		return "", errors.New("give --admin-token or --admin-token-file, not both")
	case f.file != "":
		var err error
		if tok, err = secretfile.Read("--admin-token-file", f.file, false); err != nil {
			return "", err
		}
	}
	if tok != "" && len(tok) < auth.MinAdminTokenLen {
		return "", fmt.Errorf("the admin token must be at least %d bytes, got %d (make one: umask 077; head -c 32 /dev/urandom | base64 > admin.token; then --admin-token-file admin.token)", auth.MinAdminTokenLen, len(tok))
	}
	return tok, nil
}

// paymentFlags are --payment-secret-file: the key the payment provider
// signs its webhook (POST /api/payments) with.
type paymentFlags struct {
	file string
}

func (f *paymentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "payment-secret-file", "", "read the payment provider's webhook signing secret from this file (trailing whitespace dropped); without it POST /api/payments answers unavailable")
}

// secret returns the secret read from the file, or nil without one.
func (f *paymentFlags) secret() ([]byte, error) {
	if f.file == "" {
		return nil, nil
	}
	s, err := secretfile.Read("--payment-secret-file", f.file, true)
	return []byte(s), err
}
