package httpapi

import "net/http"

// NoSniff sets X-Content-Type-Options: nosniff on every answer of h, so
// no browser reads a JSON answer (a voucher's title in it) as a page or a
// script.
func NoSniff(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
