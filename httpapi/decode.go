package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/flashsale/flashsale"
)

// maxBodyBytes bounds request bodies; a voucher needs a few hundred bytes.
const maxBodyBytes = 64 << 10

// decodeJSON decodes exactly one JSON object from the body into v (see
// decodeBody).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeBody(body, v)
}

// readBody reads the whole body, refusing one over maxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return nil, decodeError(err)
	}
	return body, nil
}

// decodeBody decodes exactly one JSON object from body into v, rejecting
// unknown fields, trailing data and bodies that are not UTF-8 with
// EInvalid errors that say what is wrong. The body is checked as bytes
// first: encoding/json would quietly turn bytes that are not UTF-8 into
// U+FFFD.
func decodeBody(body []byte, v any) error {
	if at := invalidUTF8(body); at >= 0 {
		return flashsale.Errorf(flashsale.EInvalid, "the body is not valid UTF-8 (at byte %d)", at)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if err := exactKeys(body, v); err != nil {
		return err
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return flashsale.Errorf(flashsale.EInvalid, "the body must hold a single JSON object")
	}
	return nil
}

// invalidUTF8 returns the offset of the first byte of b that is not part
// of valid UTF-8, or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// decodeError turns encoding/json's errors into messages for the client.
func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig *http.MaxBytesError
	)
	switch {
	case flashsale.ErrorCode(err) != flashsale.EInternal: // a field's own UnmarshalJSON
		return err
	case errors.Is(err, io.EOF):
		return flashsale.Errorf(flashsale.EInvalid, "the body is empty; a JSON object is required")
	case errors.As(err, &tooBig):
		return flashsale.Errorf(flashsale.EInvalid, "the body is larger than %d bytes", tooBig.Limit)
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return flashsale.Errorf(flashsale.EInvalid, "the body is not valid JSON")
	case errors.As(err, &typ) && typ.Field == "":
		return flashsale.Errorf(flashsale.EInvalid, "the body must be a JSON object, not a JSON %s", typ.Value)
	case errors.As(err, &typ) && strings.HasPrefix(typ.Value, "number ") && isInteger(typ.Type.Kind().String()):
		return numberError(typ.Field, strings.TrimPrefix(typ.Value, "number "))
	case errors.As(err, &typ):
		return flashsale.Errorf(flashsale.EInvalid, "field %q must be a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return flashsale.Errorf(flashsale.EInvalid, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return flashsale.Errorf(flashsale.EInvalid, "the body could not be read as JSON: %v", err)
	}
}

// numberError explains why the JSON number literal of an integer field
// was refused: it has a fraction or an exponent, or it is out of range.
func numberError(field, literal string) error {
	shown := literal
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	if strings.TrimLeft(strings.TrimPrefix(literal, "-"), "0123456789") == "" {
		return flashsale.Errorf(flashsale.EInvalid, "field %q is out of range for a 64-bit integer, got %s", field, shown)
	}
	return flashsale.Errorf(flashsale.EInvalid, "field %q must be a whole number (digits only, no fraction or exponent), got %s", field, shown)
}

// jsonKind names the JSON value a field of Go kind goKind takes; Go's
// integers take whole numbers.
func jsonKind(goKind string) string {
	switch {
	case isInteger(goKind):
		return "number (a whole number)"
	case strings.HasPrefix(goKind, "float"):
		return "number"
	}
	return goKind
}

func isInteger(goKind string) bool {
	return strings.HasPrefix(goKind, "int") || strings.HasPrefix(goKind, "uint")
}

// pathID parses the {name} path value as an id (see flashsale.ParseID).
func pathID(r *http.Request, name string) (int64, error) {
	s := r.PathValue(name)
	id, err := flashsale.ParseID(s)
	if err != nil {
		return 0, flashsale.Errorf(flashsale.EInvalid, "%s must be a positive decimal integer, without sign or leading zeros, of at most %d; got %q", name, int64(math.MaxInt64), s)
	}
	return id, nil
}
