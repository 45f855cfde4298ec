package httpapi

import (
	"net/http/httptest"
	"testing"
)

func TestClientIP(t *testing.T) {
	tests := []struct {
		name       string
		trustProxy bool
		remote     string
		xff        []string // header lines, in order
		want       string
	}{
		{name: "remote IPv4", remote: "192.0.2.1:5000", want: "192.0.2.1"},
		{name: "remote IPv6 counts by its /64", remote: "[2001:db8:1:2:3:4:5:6]:5000", want: "2001:db8:1:2::/64"},
		{name: "another address of the same /64", remote: "[2001:db8:1:2:ffff::1]:5000", want: "2001:db8:1:2::/64"},
		{name: "IPv4-mapped IPv6 is IPv4", remote: "[::ffff:192.0.2.1]:5000", want: "192.0.2.1"},
		{name: "IPv6 zone dropped", remote: "[fe80::1%eth0]:5000", want: "fe80::/64"},
		{name: "X-Forwarded-For ignored unless trusted", remote: "192.0.2.1:5000", xff: []string{"198.51.100.9"}, want: "192.0.2.1"},
		{name: "last entry of one line", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"10.0.0.1, 198.51.100.9"}, want: "198.51.100.9"},
		{name: "proxy's own line after the client's", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"10.0.0.1", "198.51.100.9"}, want: "198.51.100.9"},
		{name: "proxy's IPv6 entry counts by its /64", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"2001:db8::7"}, want: "2001:db8::/64"},
		{name: "proxy's entry with a port", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"198.51.100.9:41234"}, want: "198.51.100.9"},
		{name: "proxy's IPv6 entry with a port", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"[2001:db8::7]:443"}, want: "2001:db8::/64"},
		{name: "empty last entry falls back to the peer", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"10.0.0.1, "}, want: "192.0.2.1"},
		{name: "unparsable last entry falls back to the peer", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"10.0.0.1, junk-1"}, want: "192.0.2.1"},
		{name: "unparsable entry of its own line falls back to the peer", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"198.51.100.9", "999.1.1.1"}, want: "192.0.2.1"},
		{name: "two proxies: the last entry is the first proxy's (one hop trusted)", trustProxy: true, remote: "192.0.2.1:5000", xff: []string{"203.0.113.5, 10.0.0.2"}, want: "10.0.0.2"},
		{name: "trusted but absent", trustProxy: true, remote: "192.0.2.1:5000", want: "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/vouchers/1/orders", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			s := &Server{TrustProxy: tt.trustProxy}
			if got := s.clientIP(r); got != tt.want {
				t.Errorf("clientIP = %q, want %q", got, tt.want)
			}
		})
	}
}
