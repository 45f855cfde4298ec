// Package oidctest is an identity provider for tests and benchmarks,
// over real HTTP: its discovery document at
// /.well-known/openid-configuration and its key set at /jwks, which a
// test can change (a rotation) or make fail (an outage).
package oidctest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Provider is a running identity provider; its issuer is URL.
type Provider struct {
	URL  string
	srv  *httptest.Server
	mu   sync.Mutex
	jwks []byte
	// Down makes the key set answer 503; Reads counts its reads.
	Down  atomic.Bool
	Reads atomic.Int64
}

// Start serves a provider with the key set jwks (a JWKS document) until
// the test ends.
func Start(t testing.TB, jwks []byte) *Provider {
	t.Helper()
	p := &Provider{jwks: jwks}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"issuer":"` + p.URL + `","jwks_uri":"` + p.URL + `/jwks"}`))
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.Reads.Add(1)
		if p.Down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		p.mu.Lock()
		b := p.jwks
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	p.srv = httptest.NewServer(mux)
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// SetJWKS replaces the key set the provider publishes.
func (p *Provider) SetJWKS(jwks []byte) {
	p.mu.Lock()
	p.jwks = jwks
	p.mu.Unlock()
}

// Close stops the provider: it answers nothing from then on.
func (p *Provider) Close() { p.srv.Close() }
