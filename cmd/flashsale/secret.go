package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
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
	fs.StringVar(&f.secret, "jwt-secret", "", help+" (at least 32 bytes)")
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
	b, err := os.ReadFile(f.file)
	if err != nil {
		return "", fmt.Errorf("--jwt-secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("--jwt-secret-file %s is empty", f.file)
	}
	return s, nil
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
	b, err := os.ReadFile(f.file)
	if err != nil {
		return nil, fmt.Errorf("--payment-secret-file: %w", err)
	}
	s := strings.TrimRight(string(b), " \t\r\n")
	if s == "" {
		return nil, fmt.Errorf("--payment-secret-file %s is empty", f.file)
	}
	return []byte(s), nil
}
