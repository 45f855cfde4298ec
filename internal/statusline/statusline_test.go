package statusline

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// On a terminal, two runs at once share one line, redrawn in place and
// never ended by a newline, cut to the terminal's width, and cleared when
// both finished.
func TestLineOnATerminal(t *testing.T) {
	master, slave := openPTY(t)
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 40, Row: 24}); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(master); got <- b }()
	l := New(slave)
	a, b := l.Progress("conditional", 180), l.Progress("lock ceiling 1/3 (GET /healthz)", 180)
	a.Add(10)
	time.Sleep(2 * every)
	b.Grow(20)
	b.Add(30)
	a.Finish()
	b.Finish()
	slave.Close()
	out := <-got
	if bytes.Contains(out, []byte("\n")) || !bytes.HasSuffix(out, []byte("\r\033[K")) {
		t.Errorf("the line ended a line or was not cleared: %q", out)
	}
	frames := strings.Split(string(out), "\r\033[K")
	for _, want := range []string{string([]rune("conditional 10/180 · lock ceiling 1/3 (GET /healthz) 0/200")[:39]), "lock ceiling 1/3 (GET /healthz) 30/200"} {
		if !slices.Contains(frames, want) {
			t.Errorf("no frame %q in %q", want, frames)
		}
	}
	for _, f := range frames {
		if n := len([]rune(f)); n > 39 {
			t.Errorf("a frame of %d columns on a terminal of 40: %q", n, f)
		}
	}
}

// Off a terminal the line shows nothing.
func TestLineOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf).Progress("naive", 10)
	r.Add(10)
	r.Finish()
	if buf.Len() != 0 {
		t.Errorf("off a terminal the line wrote %q", buf.String())
	}
}
