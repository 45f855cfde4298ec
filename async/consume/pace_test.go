package consume

import (
	"testing"
	"time"
)

// TestReadsShrinkWhileAcksAreSlow: each slow ack halves the next reads,
// down to a quarter of BatchSize; each quick one doubles them, up to
// BatchSize; one in between leaves them.
func TestReadsShrinkWhileAcksAreSlow(t *testing.T) {
	w := &worker{c: &Consumer{cfg: Config{BatchSize: 500}}}
	steps := []struct {
		took time.Duration
		want int
	}{
		{0, 500}, // never past BatchSize
		{slowAck + time.Millisecond, 250},
		{time.Second, 125},
		{time.Second, 125}, // never under a quarter
		{slowAck / 2, 125},
		{slowAck / 8, 250},
		{slowAck / 8, 500},
		{slowAck / 8, 500},
	}
	for i, s := range steps {
		w.paced(s.took)
		if got := w.readCount(); got != s.want {
			t.Fatalf("step %d: after an ack of %v, reads of %d; want %d", i, s.took, got, s.want)
		}
	}
}
