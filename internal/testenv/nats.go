package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSURL returns the URL of the test NATS server (with JetStream):
// $FLASHSALE_TEST_NATS, or nats://127.0.0.1:4222.
func NATSURL() string {
	if u := os.Getenv("FLASHSALE_TEST_NATS"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// NATS connects to the test NATS server and returns the connection and a
// subject and a stream name unique to this test. The stream, if the test
// creates it, is deleted when the test ends, and the connection closed.
func NATS(t testing.TB) (nc *nats.Conn, subject, stream string) {
	t.Helper()
	return NATSAt(t, NATSURL())
}

// NATSAt is NATS for the server at url.
func NATSAt(t testing.TB, url string) (nc *nats.Conn, subject, stream string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("testenv: NATS at %s is not reachable (start it with: nats-server -js): %v", url, err)
	}
	u := Unique()
	subject, stream = "test"+u, "TEST"+u
	t.Cleanup(func() {
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Errorf("testenv: jetstream: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, stream); err != nil && err != jetstream.ErrStreamNotFound {
			t.Errorf("testenv: deleting stream %s: %v", stream, err)
		}
	})
	return nc, subject, stream
}
