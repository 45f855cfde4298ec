package lab

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

var (
	_ Progress = (*display)(nil)
	_ Progress = nopProgress{}
)

// Progress is told about each answered request of a run.
type Progress interface {
	Add(n int)
	// Finish ends the display of the run.
	Finish()
}

// NewProgress returns the progress display of a run of total requests
// named label on w: a bar redrawn in place when w is a terminal, otherwise
// a plain line every few seconds, which reads well in a log or CI. Either
// ends with one line that stays: the requests done, the time and the rate.
//
// The bar is drawn here rather than by a progress-bar library: the one
// used before showed a rate from its first frame (one request in a few
// microseconds reads as 600,000 req/s) and left the last frame of a
// sub-second run at 0%.
func NewProgress(w io.Writer, label string, total int) Progress {
	d := &display{w: w, label: label, total: total, start: time.Now(), every: linesEvery}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		d.every, d.inPlace = barEvery, true
	}
	return d
}

const (
	// linesEvery is how often the plain display prints a line.
	linesEvery = 2 * time.Second
	// barEvery is how often the bar is redrawn.
	barEvery = 100 * time.Millisecond
	// rateAfter is how long a run goes before a rate is shown: over a
	// shorter time, a few requests make an absurd one.
	rateAfter = 500 * time.Millisecond
	// barWidth is the bar's width in characters.
	barWidth = 24
)

// display is both displays: inPlace redraws one line.
type display struct {
	w       io.Writer
	label   string
	total   int
	start   time.Time
	every   time.Duration
	inPlace bool

	mu      sync.Mutex
	done    int
	printed time.Time // when the last line was drawn
}

func (d *display) Add(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done += n
	last := d.printed
	if last.IsZero() {
		last = d.start
	}
	if d.total <= 0 || d.done >= d.total || time.Since(last) < d.every {
		return
	}
	d.printed = time.Now()
	if d.inPlace {
		fmt.Fprintf(d.w, "\r\033[K%s", d.status())
		return
	}
	fmt.Fprintln(d.w, d.status())
}

// status is the line of a run under way: a rate only once there is
// enough of it to mean something.
func (d *display) status() string {
	elapsed := time.Since(d.start)
	s := fmt.Sprintf("%s: %d/%d requests (%d%%) in %s", d.label, d.done, d.total, d.done*100/d.total, elapsed.Round(time.Millisecond))
	if d.inPlace {
		filled := d.done * barWidth / d.total
		s = fmt.Sprintf("%s [%s%s] %d/%d (%d%%)", d.label, strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled), d.done, d.total, d.done*100/d.total)
	}
	if elapsed >= rateAfter && d.done > 0 {
		s += fmt.Sprintf(", %.0f req/s", float64(d.done)/elapsed.Seconds())
	}
	return s
}

// Grow adds n requests to the run's total: a wave the run did not plan
// from the start.
func (d *display) Grow(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total += n
}

func (d *display) Finish() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inPlace && !d.printed.IsZero() {
		fmt.Fprint(d.w, "\r\033[K")
	}
	elapsed := time.Since(d.start)
	rate := ""
	if d.done > 0 && elapsed > 0 {
		rate = fmt.Sprintf(" (%.0f req/s)", float64(d.done)/elapsed.Seconds())
	}
	fmt.Fprintf(d.w, "%s: %d/%d requests done in %s%s\n", d.label, d.done, d.total, elapsed.Round(time.Millisecond), rate)
}

// nopProgress shows nothing.
type nopProgress struct{}

func (nopProgress) Add(int) {}
func (nopProgress) Finish() {}
