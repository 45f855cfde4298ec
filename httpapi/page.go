package httpapi

import (
	"encoding/binary"
	"net/http"
	"net/url"

	"github.com/flashsale/flashsale"
)

// Page sizes of GET /api/vouchers.
const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// cursorPurpose seals page cursors apart from anything else sealed.
const cursorPurpose = "vouchers page v1"

// voucherPage is the body of GET /api/vouchers. NextCursor is left out on
// the last page.
type voucherPage struct {
	Vouchers   []*flashsale.Voucher `json:"vouchers"`
	NextCursor string               `json:"next_cursor,omitempty"`
}

// listVouchers shows vouchers newest first, a page at a time, to anyone
// (as getVoucher does one). The cursor is the last id of the previous
// page, sealed so that a client can neither forge nor edit one: it can
// only resume where a page ended.
func (s *Server) listVouchers(w http.ResponseWriter, r *http.Request) {
	limit, before, err := s.pageQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// One more than the page tells whether a next page exists, so the last
	// page has no cursor to an empty one.
	vs, err := s.Vouchers.FindVouchers(r.Context(), before, limit+1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := voucherPage{Vouchers: vs[:min(limit, len(vs))]}
	if len(vs) > limit {
		page.NextCursor = s.Auth.Seal(cursorPurpose, binary.BigEndian.AppendUint64(nil, uint64(vs[limit-1].ID)))
	}
	writeJSON(w, http.StatusOK, page)
}

// pageQuery reads ?limit=N&cursor=C: the page size (default
// defaultPageSize) and the id the page starts below (0 for the first
// page). Any other parameter, a repeated one or an empty one is refused.
func (s *Server) pageQuery(r *http.Request) (limit int, before int64, err error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, 0, flashsale.Errorf(flashsale.EInvalid, "the query string is malformed: %v", err)
	}
	limit = defaultPageSize
	for name, values := range q {
		if len(values) > 1 {
			return 0, 0, flashsale.Errorf(flashsale.EInvalid, "query parameter %q is given %d times", name, len(values))
		}
		switch name {
		case "limit":
			if limit, err = parseLimit(values[0]); err != nil {
				return 0, 0, err
			}
		case "cursor":
			if before, err = s.parseCursor(values[0]); err != nil {
				return 0, 0, err
			}
		default:
			return 0, 0, flashsale.Errorf(flashsale.EInvalid, "unknown query parameter %q (this route takes limit and cursor)", name)
		}
	}
	return limit, before, nil
}

// parseLimit parses a page size: a canonical decimal integer from 1 to
// maxPageSize.
func parseLimit(s string) (int, error) {
	n, err := flashsale.ParseID(s)
	if err != nil || n > maxPageSize {
		return 0, flashsale.Errorf(flashsale.EInvalid, "limit must be a whole number from 1 to %d, written without sign or leading zeros; got %q", maxPageSize, s)
	}
	return int(n), nil
}

// parseCursor opens a cursor that listVouchers handed out.
func (s *Server) parseCursor(c string) (int64, error) {
	if c == "" {
		return 0, flashsale.Errorf(flashsale.EInvalid, "cursor is empty: leave it out for the first page, or pass the next_cursor of the previous page")
	}
	data, ok := s.Auth.Open(cursorPurpose, c)
	if !ok || len(data) != 8 || int64(binary.BigEndian.Uint64(data)) <= 0 {
		return 0, flashsale.Errorf(flashsale.EInvalid, "cursor is not one this service handed out; pass next_cursor from a previous page unchanged")
	}
	return int64(binary.BigEndian.Uint64(data)), nil
}
