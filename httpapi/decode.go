package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

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
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return decodeError(err)
		}
		return flashsale.Errorf(flashsale.EInvalid, "the body must hold a single JSON object")
	}
	return nil
}

// decodeError turns encoding/json's errors into messages for the client.
func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig *http.MaxBytesError
	)
	switch {
	case errors.Is(err, io.EOF):
		return flashsale.Errorf(flashsale.EInvalid, "the body is empty; a JSON object is required")
	case errors.As(err, &tooBig):
		return flashsale.Errorf(flashsale.EInvalid, "the body is larger than %d bytes", tooBig.Limit)
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return flashsale.Errorf(flashsale.EInvalid, "the body is not valid JSON")
	case errors.As(err, &typ) && typ.Field == "":
		return flashsale.Errorf(flashsale.EInvalid, "the body must be a JSON object, not a JSON %s", typ.Value)
	case errors.As(err, &typ):
		return flashsale.Errorf(flashsale.EInvalid, "field %q must be a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return flashsale.Errorf(flashsale.EInvalid, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return flashsale.Errorf(flashsale.EInvalid, "the body could not be read as JSON: %v", err)
	}
}

// jsonKind names the JSON value a field of Go kind goKind takes.
func jsonKind(goKind string) string {
	if strings.HasPrefix(goKind, "int") || strings.HasPrefix(goKind, "uint") || strings.HasPrefix(goKind, "float") {
		return "number"
	}
	return goKind
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
