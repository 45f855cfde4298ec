package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/flashsale/flashsale/lab"
)

// registerHTML adds --html to bench and demo.
func registerHTML(fs *flag.FlagSet, c *benchConfig) {
	fs.StringVar(&c.htmlPath, "html", "", "also write the runs as one self-contained HTML page (setup, table, verdicts, charts) to this file")
}

// writeReport writes rep to a new file at path with write, if a path is
// given (by flag), and says so.
func writeReport(path, flagName string, rep lab.Report, write func(io.Writer, lab.Report) error, stdout io.Writer) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err == nil {
		err = write(f, rep)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", flagName, err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return nil
}
