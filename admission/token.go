package admission

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
)

// Tickets and passes are signed strings, so a poll or an order finds what
// it names without a lookup, and nobody can make one up:
//
//	ticket: <user>.<score>.<round>.<mac>
//	pass:   <user>.<pass id>.<expiry ms>.<mac>
//
// The mac is HMAC-SHA256, cut to 16 bytes, over the kind, the voucher and
// the fields, with a key derived from Config.Secret: a ticket or pass of
// one voucher is no good for another, and neither passes for the other.

// deriveKey derives the signing key from the secret, so the key of user
// tokens is never used as is.
func deriveKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("flashsale admission v1"))
	return m.Sum(nil)
}

// sign returns the token of the fields.
func (q *Queue) sign(kind string, voucherID int64, fields ...string) string {
	body := strings.Join(fields, ".")
	return body + "." + q.mac(kind, voucherID, body)
}

func (q *Queue) mac(kind string, voucherID int64, body string) string {
	// A pooled HMAC restarts from its keyed state: no key schedule and no
	// allocation per token.
	m, _ := q.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, q.macKey)
	}
	var buf [160]byte
	b := append(append(buf[:0], kind...), '|')
	b = append(append(strconv.AppendInt(b, voucherID, 10), '|'), body...)
	m.Write(b)
	var sum [sha256.Size]byte
	s := m.Sum(sum[:0])
	m.Reset()
	q.macs.Put(m)
	return base64.RawURLEncoding.EncodeToString(s[:16])
}

// open checks a token of n fields and returns them, or false.
func (q *Queue) open(kind string, voucherID int64, token string, n int) ([]string, bool) {
	if len(token) > 200 {
		return nil, false
	}
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return nil, false
	}
	body, mac := token[:i], token[i+1:]
	if !hmac.Equal([]byte(mac), []byte(q.mac(kind, voucherID, body))) {
		return nil, false
	}
	fields := strings.Split(body, ".")
	if len(fields) != n {
		return nil, false
	}
	return fields, true
}

// passToken returns the pass of a pass record ("score:pass:expiry").
func (q *Queue) passToken(voucherID int64, user, rec string) string {
	parts := strings.Split(rec, ":")
	if len(parts) < 3 {
		return ""
	}
	return q.sign("p", voucherID, user, parts[1], parts[2])
}
