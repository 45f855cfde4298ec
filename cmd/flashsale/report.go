package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/flashsale/flashsale/lab"
)

// registerHTML adds --html to bench and demo.
func registerHTML(fs *flag.FlagSet, c *benchConfig) {
	fs.StringVar(&c.htmlPath, "html", "", "also write the runs as one self-contained HTML page (table, verdicts, charts) to this file")
}

// writeHTML writes the --html report, if asked for.
func writeHTML(cfg benchConfig, rows []lab.Row, stdout io.Writer) error {
	if cfg.htmlPath == "" {
		return nil
	}
	if err := writeRows(cfg.htmlPath, rows, lab.WriteHTML); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", cfg.htmlPath)
	return nil
}

// writeRows writes rows to a new file at path with write.
func writeRows(path string, rows []lab.Row, write func(io.Writer, []lab.Row) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f, rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
