package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/oidctest"
)

// writeKey writes key as a PKCS#8 PEM file and returns its path.
func writeKey(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runOut(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("flashsale %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// TestServeWithProvider: keys in files, their JWKS from `flashsale jwks`
// published by a provider, tokens from `flashsale token --key`, and serve
// --oidc-issuer taking them: an RS256 and an ES256 token of one subject
// are one buyer.
func TestServeWithProvider(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsPath, esPath := writeKey(t, rk), writeKey(t, ek)
	p := oidctest.Start(t, []byte(runOut(t, "jwks", "--key", rsPath, "--key", esPath)))
	rsTok := runOut(t, "token", "--key", rsPath, "--issuer", p.URL, "--audience", "shop", "--subject", "auth0|alice")
	esTok := runOut(t, "token", "--key", esPath, "--issuer", p.URL, "--audience", "shop", "--subject", "auth0|alice")
	url, _ := startServe(t, "--oidc-issuer", p.URL, "--token-audience", "shop")
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(3), &v); code != http.StatusCreated {
		t.Fatalf("create voucher: %d", code)
	}
	if code := call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", rsTok, "", nil); code != http.StatusOK {
		t.Fatalf("order with the RS256 token: %d", code)
	}
	var e struct{ Error struct{ Code string } }
	if code := call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", esTok, "", &e); code != http.StatusConflict || e.Error.Code != "duplicate_order" {
		t.Fatalf("order with the ES256 token of the same subject: %d %+v; want 409 duplicate_order", code, e)
	}
	if code := call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", userToken(t, 1), "", nil); code != http.StatusOK {
		t.Fatalf("order with an HS256 token beside the provider: %d", code)
	}
}

// TestServeProviderFlags: the provider's flags go together.
func TestServeProviderFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--oidc-issuer", "https://id.example.com"},
		{"--jwks-url", "https://id.example.com/jwks", "--token-audience", "shop"},
		{"--oidc-issuer", "https://id.example.com", "--token-issuer", "x", "--token-audience", "shop"},
		{"--token-audience", "shop"},
	} {
		err := run(context.Background(), append([]string{"serve", "--jwt-secret", serveSecret}, args...), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("serve %v: %v; want a usage error", args, err)
		}
	}
}
