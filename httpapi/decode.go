package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// maxBodyBytes bounds request bodies; a voucher needs a few hundred bytes.
const maxBodyBytes = 64 << 10

// decodeJSON decodes exactly one JSON object from the body into v,
// rejecting unknown fields, trailing data and bodies over maxBodyBytes with
// EInvalid errors that say what is wrong.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return flashsale.Errorf(flashsale.EInvalid, "the body must hold a single JSON object")
	}
	return nil
}

// decodeError turns encoding/json's errors into messages for the client.
func decodeError(err error) error {
	var (
		syntax  *json.SyntaxError
		typ     *json.UnmarshalTypeError
		tooBig  *http.MaxBytesError
		timeErr *time.ParseError
	)
	switch {
	case errors.Is(err, io.EOF):
		return flashsale.Errorf(flashsale.EInvalid, "the body is empty; a JSON object is required")
	case errors.As(err, &tooBig):
		return flashsale.Errorf(flashsale.EInvalid, "the body is larger than %d bytes", tooBig.Limit)
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return flashsale.Errorf(flashsale.EInvalid, "the body is not valid JSON")
	case errors.As(err, &typ):
		return flashsale.Errorf(flashsale.EInvalid, "field %q must be a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()))
	case errors.As(err, &timeErr):
		return flashsale.Errorf(flashsale.EInvalid, "times must be RFC 3339, like 2026-11-21T10:00:00Z")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return flashsale.Errorf(flashsale.EInvalid, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return flashsale.Errorf(flashsale.EInvalid, "the body could not be read as JSON: %v", err)
	}
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"), strings.HasPrefix(goKind, "float"):
		return "number"
	case goKind == "struct":
		return "string in RFC 3339 form"
	default:
		return goKind
	}
}

// pathID parses the {name} path value as a positive decimal 64-bit id.
func pathID(r *http.Request, name string) (int64, error) {
	s := r.PathValue(name)
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, flashsale.Errorf(flashsale.EInvalid, "%s must be a positive decimal integer, got %q", name, s)
	}
	return id, nil
}
