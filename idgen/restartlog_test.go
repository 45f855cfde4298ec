package idgen

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestRestartLogLevel: creating the hash on first use (the floor knows no
// ID, the generator handed out none) is logged at INFO; a hash missing
// while the database holds IDs, or after IDs were handed out, at WARN.
func TestRestartLogLevel(t *testing.T) {
	tests := []struct {
		name      string
		floorID   int64
		loseLater bool
		want      string
	}{
		{"first use", 0, false, "level=INFO msg=\"idgen: created the Redis hash (first use"},
		{"lost, the database holds IDs", compose(100, 5), false, "level=WARN msg=\"idgen: the Redis hash was missing (lost)"},
		{"lost after IDs were handed out", 0, true, "level=WARN msg=\"idgen: the Redis hash was missing (lost)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, prefix := testenv.Redis(t)
			var logs testenv.Buffer
			floor := func(context.Context) (int64, error) { return tt.floorID, nil }
			g := newGen(t, c, prefix, "order", WithFloor(floor), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			take(t, g, 1)
			if tt.loseLater {
				settle(g)
				if strings.Contains(logs.String(), "WARN") {
					t.Fatalf("a warning before the loss:\n%s", logs.String())
				}
				if err := c.Do(context.Background(), c.B().Del().Key(prefix+"{order}").Build()).Error(); err != nil {
					t.Fatal(err)
				}
				take(t, g, 3000) // through the ranges held into a new one
			}
			settle(g)
			if got := logs.String(); !strings.Contains(got, tt.want) {
				t.Errorf("log lacks %q:\n%s", tt.want, got)
			}
			if tt.floorID != 0 || tt.loseLater {
				return
			}
			if got := logs.String(); strings.Contains(got, "level=WARN") {
				t.Errorf("first use logged a warning:\n%s", got)
			}
		})
	}
}
