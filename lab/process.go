package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ServingPrefix starts the line `flashsale serve` prints on stdout once it
// listens: "flashsale: serving http://HOST:PORT (strategy S)".
const ServingPrefix = "flashsale: serving "

// Process is a server running as a child process: `flashsale serve` on a
// port of its choosing. Its stdout and stderr go to its log file.
type Process struct {
	// URL is where it serves; Log the path of its log file.
	URL string
	Log string

	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// StartProcess starts cmd (a `flashsale serve` command line with --addr
// 127.0.0.1:0), logging to the file log, waits for the URL it prints and
// then until it answers GET /readyz with 200, at most timeout in all. On
// failure the process is stopped and the error ends with the tail of its
// log. On Linux the process gets SIGTERM if this one dies first.
func StartProcess(ctx context.Context, cmd *exec.Cmd, log string, timeout time.Duration) (*Process, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	p := &Process{Log: log, cmd: cmd, logFile: f, done: make(chan struct{})}
	cmd.Stderr = f
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	supervise(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	urls := make(chan string, 1)
	go p.follow(stdout, urls)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case p.URL = <-urls:
	case <-p.done:
		err = fmt.Errorf("the server exited before serving: %v", p.waitErr)
	case <-ctx.Done():
		err = fmt.Errorf("the server printed no %q line in %s: %w", ServingPrefix, timeout, ctx.Err())
	}
	if err == nil {
		err = WaitReady(ctx, p.URL)
	}
	if err != nil {
		p.Stop(5 * time.Second) //nolint:errcheck // the start failed; that error is the one to report
		return nil, fmt.Errorf("%w\n%s", err, p.tail())
	}
	return p, nil
}

// follow copies the process's stdout to its log, sends the URL of the
// serving line to urls, and records the exit once stdout is closed (Wait
// must not run before the pipe is drained).
func (p *Process) follow(stdout io.Reader, urls chan<- string) {
	defer close(p.done)
	sent := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(p.logFile, line)
		if rest, ok := strings.CutPrefix(line, ServingPrefix); ok && !sent {
			url, _, _ := strings.Cut(rest, " ")
			urls <- url
			sent = true
		}
	}
	_, _ = io.Copy(p.logFile, stdout) // a line too long for the scanner; keep the rest
	p.waitErr = p.cmd.Wait()
}

// Stop asks the process to finish (SIGTERM: it drains in-flight requests
// and stops its consumer), kills it if it has not exited within timeout,
// and closes its log. It returns the process's exit error, if any.
func (p *Process) Stop(timeout time.Duration) error {
	defer p.logFile.Close()
	select {
	case <-p.done:
		return p.exitError()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited meanwhile; done tells
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitError()
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("server %s did not stop within %s after SIGTERM and was killed (log %s)", p.URL, timeout, p.Log)
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the process at once (SIGKILL: no drain, no goodbye — a crash)
// and waits until it is gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill() // it may have exited already; done tells
	<-p.done
}

func (p *Process) exitError() error {
	if p.waitErr != nil {
		return fmt.Errorf("server %s: %w (log %s)", p.URL, p.waitErr, p.Log)
	}
	return nil
}

// tail returns the end of the log, indented, for an error message.
func (p *Process) tail() string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return "  (log unreadable: " + err.Error() + ")"
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "  log " + p.Log + ":\n  " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n  ")
}

// WaitReady polls GET url/readyz until it answers 200, or ctx ends.
func WaitReady(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /readyz answered %s", resp.Status)
		}
		last = err
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			return errors.Join(fmt.Errorf("%s is not ready: %w", url, err), last)
		}
	}
}
