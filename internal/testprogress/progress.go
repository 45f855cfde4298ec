package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// event is one line of go test -json (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
	Output  string
}

// progress is what is known of a run so far.
type progress struct {
	w   io.Writer
	now func() time.Time

	mu      sync.Mutex
	begin   time.Time
	running map[string]time.Time // package → when it started
	pkgs    map[string]*pkgOutput
	done    []pkgResult
	tests   []pkgResult // every test that ended, with its package
	failed  int
}

// pkgOutput is a package's output, kept until it ends: by test, and the
// lines of no test (the package's own: a panic, a build error).
type pkgOutput struct {
	tests  map[string][]string
	ended  map[string]bool // the tests that passed or were skipped
	failed []string        // the tests that failed, in order
	own    []string
}

// pkgResult is an ended package.
type pkgResult struct {
	name    string
	action  string // pass, fail or skip
	elapsed time.Duration
}

func newProgress(w io.Writer, now func() time.Time) *progress {
	return &progress{w: w, now: now, begin: now(), running: map[string]time.Time{}, pkgs: map[string]*pkgOutput{}}
}

// read handles every line of r; a line that is not a JSON event (what
// go test printed itself) is printed as it is.
func (p *progress) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			p.printf("%s\n", sc.Text())
			continue
		}
		p.handle(e)
	}
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// handle records one event and prints what it starts or ends.
func (p *progress) handle(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Package == "" { // build-output (a compile error, printed at once), build-fail
		fmt.Fprint(p.w, e.Output)
		return
	}
	o := p.pkgs[e.Package]
	if o == nil {
		o = &pkgOutput{tests: map[string][]string{}, ended: map[string]bool{}}
		p.pkgs[e.Package] = o
	}
	switch {
	case e.Action == "start":
		p.running[e.Package] = p.now()
		fmt.Fprintf(p.w, "start %s\n", e.Package)
	case e.Action == "output":
		if e.Test == "" {
			o.own = append(o.own, e.Output)
		} else {
			o.tests[e.Test] = append(o.tests[e.Test], e.Output)
		}
	case e.Test != "" && (e.Action == "pass" || e.Action == "skip"):
		p.tests = append(p.tests, pkgResult{e.Package + " " + e.Test, e.Action, seconds(e.Elapsed)})
		o.ended[e.Test] = true
		delete(o.tests, e.Test) // nothing of a passing test is printed
	case e.Test != "" && e.Action == "fail":
		p.tests = append(p.tests, pkgResult{e.Package + " " + e.Test, e.Action, seconds(e.Elapsed)})
		o.ended[e.Test] = true
		o.failed = append(o.failed, e.Test)
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		p.ended(e, o)
	}
}

// ended prints a package's end: one line, and for a failure the output of
// every test that failed or never ended (a timeout, a panic) and the
// package's own lines.
func (p *progress) ended(e event, o *pkgOutput) {
	elapsed := seconds(e.Elapsed)
	delete(p.running, e.Package)
	delete(p.pkgs, e.Package)
	p.done = append(p.done, pkgResult{e.Package, e.Action, elapsed})
	word := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "?   "}[e.Action]
	fmt.Fprintf(p.w, "%s  %s  %s  [%d done, %d running, %s]\n", word, e.Package, elapsed.Round(100*time.Millisecond),
		len(p.done), len(p.running), p.now().Sub(p.begin).Round(time.Second))
	if e.Action != "fail" {
		return
	}
	p.failed++
	var names []string
	for name := range o.tests {
		if !o.ended[name] || slices.Contains(o.failed, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(p.w, "--- output of %s (%s)\n%s", name, e.Package, strings.Join(o.tests[name], ""))
	}
	fmt.Fprintf(p.w, "--- output of %s\n%s", e.Package, strings.Join(o.own, ""))
}

// heartbeat names the packages still running and for how long.
func (p *progress) heartbeat() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.running) == 0 {
		return
	}
	var names []string
	for name, since := range p.running {
		names = append(names, fmt.Sprintf("%s (%s)", name, p.now().Sub(since).Round(time.Second)))
	}
	slices.Sort(names)
	fmt.Fprintf(p.w, "running after %s: %s\n", p.now().Sub(p.begin).Round(time.Second), strings.Join(names, ", "))
}

// summary prints the run's time, how many packages failed, and the five
// slowest packages and the ten slowest tests (subtests included).
func (p *progress) summary() {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%d packages in %s, %d failed; slowest: %s\n", len(p.done),
		p.now().Sub(p.begin).Round(time.Second), p.failed, slowest(p.done, 5))
	fmt.Fprintf(p.w, "slowest tests: %s\n", slowest(p.tests, 10))
}

// slowest names the n longest of rs with their times, longest first.
func slowest(rs []pkgResult, n int) string {
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(a, b pkgResult) int { return int(b.elapsed - a.elapsed) })
	var names []string
	for _, r := range rs[:min(n, len(rs))] {
		names = append(names, fmt.Sprintf("%s %s", r.name, r.elapsed.Round(100*time.Millisecond)))
	}
	return strings.Join(names, ", ")
}

// seconds converts go test -json's Elapsed.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
