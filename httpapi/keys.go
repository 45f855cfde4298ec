package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/flashsale/flashsale"
)

// exactKeys checks the top-level keys of the JSON object body, which
// decoded into the struct v points to: each must be one of v's field
// names exactly (encoding/json matches them without case, so
// {"Quantity":1} was taken), and appear once (encoding/json keeps the
// last of two, so a proxy and the service could each read another).
func exactKeys(body []byte, v any) error {
	names := fieldNames(reflect.TypeOf(v))
	if names == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {: decoded once already
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		switch {
		case !names[key]:
			return flashsale.Errorf(flashsale.EInvalid, "unknown field %q (field names are exact: lower case)", key)
		case seen[key]:
			return flashsale.Errorf(flashsale.EInvalid, "field %q is given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// fieldNames returns the JSON names of the fields of the struct t points
// to, or nil when t is not a pointer to a struct.
func fieldNames(t reflect.Type) map[string]bool {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	for f := range t.Elem().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	return names
}
