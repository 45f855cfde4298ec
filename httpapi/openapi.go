package httpapi

import (
	_ "embed" // the OpenAPI document
	"net/http"
)

// openAPIDoc is the OpenAPI 3 description of the API. It is written by
// hand, next to the routes it describes; a test fails when a route, a
// method or an error code is missing from it.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 document served at GET /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
