package lab

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

var (
	_ Progress = (*bar)(nil)
	_ Progress = (*lines)(nil)
	_ Progress = nopProgress{}
)

// Progress is told about each answered request of a run.
type Progress interface {
	Add(n int)
	// Finish ends the display of the run.
	Finish()
}

// NewProgress returns the progress display of a run of total requests
// named label on w: a live bar when w is a terminal, otherwise a plain
// line every few seconds and one at the end, which reads well in a log or
// CI.
func NewProgress(w io.Writer, label string, total int) Progress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &bar{progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("req"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(30),
		)}
	}
	return &lines{w: w, label: label, total: total, start: time.Now()}
}

// bar is the terminal display.
type bar struct{ b *progressbar.ProgressBar }

func (p *bar) Add(n int) { _ = p.b.Add(n) } // a failed write to the terminal is no reason to stop
func (p *bar) Finish()   { _ = p.b.Finish() }

// lines is the plain display.
type lines struct {
	w     io.Writer
	label string
	total int
	start time.Time

	mu      sync.Mutex
	done    int
	printed time.Time // when the last line was printed
}

// linesEvery is how often the plain display prints a line during a run.
const linesEvery = 2 * time.Second

func (p *lines) Add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	last := p.printed
	if last.IsZero() {
		last = p.start
	}
	if p.total <= 0 || p.done >= p.total || time.Since(last) < linesEvery {
		return
	}
	p.printed = time.Now()
	fmt.Fprintf(p.w, "%s: %d/%d requests (%d%%) in %s\n", p.label, p.done, p.total, p.done*100/p.total, time.Since(p.start).Round(time.Millisecond))
}

func (p *lines) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s: %d/%d requests done in %s\n", p.label, p.done, p.total, time.Since(p.start).Round(time.Millisecond))
}

// nopProgress shows nothing.
type nopProgress struct{}

func (nopProgress) Add(int) {}
func (nopProgress) Finish() {}
