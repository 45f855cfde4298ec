package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
)

// logFlags configure a command's log: text lines on stderr.
type logFlags struct {
	level levelFlag
}

func (f *logFlags) register(fs *flag.FlagSet) {
	f.level = levelFlag{slog.LevelInfo}
	fs.Var(&f.level, "log-level", "the least severe log lines written: debug, info, warn or error (debug adds requests abandoned by their clients)")
}

// logger returns the log the flags describe, writing to w.
func (f *logFlags) logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: f.level.Level}))
}

// levelFlag is a slog.Level written as it is given, in lower case (info,
// not slog's INFO), in the help's default too.
type levelFlag struct{ slog.Level }

func (l *levelFlag) String() string     { return strings.ToLower(l.Level.String()) }
func (l *levelFlag) Set(s string) error { return l.UnmarshalText([]byte(s)) }
