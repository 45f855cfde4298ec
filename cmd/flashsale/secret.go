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
