package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// SigningKey is a provider's private key as `flashsale token` and the
// tests sign with: its kid, its alg and the key.
type SigningKey struct {
	KID string
	Alg string // RS256 for RSA, ES256 for P-256, EdDSA for Ed25519
	Key crypto.Signer
}

// ParseSigningKey reads a PEM private key (PKCS#8, PKCS#1 RSA or SEC 1
// EC): RSA of at least 2048 bits, P-256 or Ed25519. alg may ask PS256 of
// an RSA key; "" takes the key's default. Its kid is a hash of the public
// key.
func ParseSigningKey(pemBytes []byte, alg string) (*SigningKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("auth: no PEM block in the key file")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: the key file: %w", err)
	}
	return NewSigningKey(key, alg)
}

// NewSigningKey is ParseSigningKey of a parsed key.
func NewSigningKey(key any, alg string) (*SigningKey, error) {
	var def string
	var allowed []string
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("auth: an RSA key of %d bits; at least 2048", k.N.BitLen())
		}
		def, allowed = "RS256", []string{"RS256", "PS256"}
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("auth: an EC key must be on P-256 (ES256)")
		}
		def, allowed = "ES256", []string{"ES256"}
	case ed25519.PrivateKey:
		def, allowed = "EdDSA", []string{"EdDSA"}
	default:
		return nil, fmt.Errorf("auth: a %T key; want RSA, P-256 or Ed25519", key)
	}
	if alg == "" {
		alg = def
	}
	if !slices.Contains(allowed, alg) {
		return nil, fmt.Errorf("auth: a %s key signs %v, not %s", def[:2], allowed, alg)
	}
	signer := key.(crypto.Signer)
	der, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, fmt.Errorf("auth: the public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return &SigningKey{KID: base64.RawURLEncoding.EncodeToString(sum[:12]), Alg: alg, Key: signer}, nil
}

// Sign returns a token of claims signed with the key, its kid in the
// header.
func (k *SigningKey) Sign(claims jwt.Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), claims)
	t.Header["kid"] = k.KID
	return t.SignedString(k.Key)
}

// JWKS returns the JSON Web Key Set of the keys' public halves, as a
// provider publishes it.
func JWKS(keys ...*SigningKey) ([]byte, error) {
	if len(keys) == 0 {
		return nil, errors.New("auth: a JWKS of no key (give --key)")
	}
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range keys {
		j, err := jwkset.NewJWKFromKey(k.Key.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.KID, ALG: jwkset.ALG(k.Alg), USE: jwkset.UseSig},
		})
		if err != nil {
			return nil, fmt.Errorf("auth: JWK of %s: %w", k.KID, err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	return json.MarshalIndent(set, "", "  ")
}

// ReadSigningKey is ParseSigningKey of the file at path.
func ReadSigningKey(path, alg string) (*SigningKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return ParseSigningKey(b, alg)
}

// ProviderToken returns a token as a provider signs it: iss, aud, sub,
// iat and exp ttl ahead.
func (k *SigningKey) ProviderToken(issuer, audience, subject string, ttl time.Duration) (string, error) {
	now := time.Now()
	return k.Sign(jwt.MapClaims{"iss": issuer, "aud": audience, "sub": subject, "iat": now.Unix(), "exp": now.Add(ttl).Unix()})
}
