package main

import (
	"flag"
	"io"
	"log/slog"
)

// logFlags configure a command's log: text lines on stderr.
type logFlags struct {
	level slog.Level
}

func (f *logFlags) register(fs *flag.FlagSet) {
	fs.TextVar(&f.level, "log-level", slog.LevelInfo, "the least severe log lines written: debug, info, warn or error (debug adds requests abandoned by their clients)")
}

// logger returns the log the flags describe, writing to w.
func (f *logFlags) logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: f.level}))
}
