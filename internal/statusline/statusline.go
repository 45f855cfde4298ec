// Package statusline draws one line of progress shared by the runs under
// way, redrawn in place on a terminal: the demo's (flashsale demo).
package statusline

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Line is one line of progress shared by the runs under way, redrawn in
// place ("\r") on a terminal and cleared once none is: the demo's, whose
// runs go on several at once and whose tables no progress line may
// interleave. Off a terminal it shows nothing. Its Progress values are
// lab.Progress (Add, Grow, Finish).
type Line struct {
	w     io.Writer
	fd    int // -1: not a terminal
	mu    sync.Mutex
	runs  []*lineRun
	drawn time.Time
}

// lineRun is one run's part of a Line.
type lineRun struct {
	line        *Line
	label       string
	done, total int
}

// New returns the status line on w.
func New(w io.Writer) *Line {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &Line{w: w, fd: int(f.Fd())}
	}
	return &Line{w: w, fd: -1}
}

// Run is a run's progress: Add answered requests, Grow the total, and
// Finish.
type Run interface {
	Add(n int)
	Grow(n int)
	Finish()
}

// Progress adds the run of total requests named label to the line.
func (l *Line) Progress(label string, total int) Run {
	if l.fd < 0 {
		return none{}
	}
	r := &lineRun{line: l, label: label, total: total}
	l.update(func() { l.runs = append(l.runs, r) }, true)
	return r
}

// none is the Run of a line off a terminal.
type none struct{}

func (none) Add(int)  {}
func (none) Grow(int) {}
func (none) Finish()  {}

func (r *lineRun) Add(n int)  { r.line.update(func() { r.done += n }, false) }
func (r *lineRun) Grow(n int) { r.line.update(func() { r.total += n }, false) }
func (r *lineRun) Finish() {
	r.line.update(func() { r.line.runs = slices.DeleteFunc(r.line.runs, func(x *lineRun) bool { return x == r }) }, true)
}

// every is how often the line is redrawn while runs go on.
const every = 100 * time.Millisecond

// update applies f and redraws the line: at once if now, else at most
// every every. It is cut to the terminal's width, since a wrapped line
// is not redrawn in place.
func (l *Line) update(f func(), now bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
	if !now && time.Since(l.drawn) < every {
		return
	}
	l.drawn = time.Now()
	parts := make([]string, len(l.runs))
	for i, r := range l.runs {
		parts[i] = fmt.Sprintf("%s %d/%d", r.label, r.done, r.total)
	}
	width, _, err := term.GetSize(l.fd)
	if err != nil || width <= 1 {
		width = 80
	}
	line := []rune(strings.Join(parts, " · "))
	fmt.Fprintf(l.w, "\r\033[K%s", string(line[:min(len(line), width-1)]))
}
