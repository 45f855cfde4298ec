package lab

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestProgressShowsNoEarlyRate: the bar shows no rate before it has run
// long enough for one to mean something, and its last line stays, with
// the count reached and the rate over the whole run.
func TestProgressShowsNoEarlyRate(t *testing.T) {
	var buf bytes.Buffer
	d := &display{w: &buf, label: "naive ceiling 1/3 (GET /healthz)", total: 900, start: time.Now(), inPlace: true}
	d.Add(1)
	if got := buf.String(); !strings.Contains(got, "1/900 (0%)") || strings.Contains(got, "req/s") {
		t.Errorf("first frame %q: want the count and no rate", got)
	}
	buf.Reset()
	d.start = time.Now().Add(-time.Second) // a second into the run
	d.Add(449)
	if got := buf.String(); !strings.Contains(got, "450/900 (50%), 4") || !strings.HasSuffix(got, " req/s") { // about 450
		t.Errorf("frame after a second %q: want the count and a rate", got)
	}
	buf.Reset()
	d.Add(450)
	d.Finish()
	if got := buf.String(); !strings.HasPrefix(got, "\r\033[K") || !strings.Contains(got, "naive ceiling 1/3 (GET /healthz): 900/900 requests done in ") || !strings.HasSuffix(got, " req/s)\n") {
		t.Errorf("last line %q: want the bar cleared, the count reached and the run's rate", got)
	}
}
