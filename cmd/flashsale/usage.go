package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// helpWidth is the column the help text wraps at.
const helpWidth = 80

// usageText is a command's help: its usage line, what it does (wrapped;
// a paragraph of LongHelp whose lines are indented, an example, as it is),
// its subcommands, and each flag (but the refused ones) with its default,
// its help (wrapped) and, for a command that reads the environment, its
// FLASHSALE_* variable.
func usageText(c *ffcli.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n", c.ShortUsage)
	if c.ShortHelp != "" {
		fmt.Fprintf(&b, "%s\n", wrap(strings.ToUpper(c.ShortHelp[:1])+c.ShortHelp[1:]+".", 0))
	}
	for _, p := range strings.Split(c.LongHelp, "\n\n") {
		if !strings.HasPrefix(p, " ") {
			p = wrap(p, 0)
		}
		if p != "" {
			fmt.Fprintf(&b, "\n%s\n", p)
		}
	}
	if len(c.Subcommands) > 0 {
		b.WriteString("\nCommands:\n")
		tw := tabwriter.NewWriter(&b, 0, 2, 2, ' ', 0)
		for _, s := range c.Subcommands {
			fmt.Fprintf(tw, "  %s\t%s\n", s.Name, s.ShortHelp)
		}
		tw.Flush()
	}
	env := len(c.Options) > 0
	first := true
	c.FlagSet.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(*refusedFlag); ok {
			return
		}
		if first {
			b.WriteString("\nFlags:\n")
			first = false
		}
		name, help := flag.UnquoteUsage(f)
		switch {
		case isBoolFlag(f):
			name = "--" + f.Name + "=" + f.DefValue
		case f.DefValue != "" && f.DefValue != "0" || name == "":
			name = "--" + f.Name + " " + f.DefValue
		default:
			name = "--" + f.Name + " " + name
		}
		if env {
			help += " [" + envName(f.Name) + "]"
		}
		fmt.Fprintf(&b, "  %s\n%s\n", name, wrap(help, 6))
	})
	return b.String()
}

// refusedFlag is a flag a command takes only to refuse it with a better
// answer than "unknown flag" (demo's --redis: use bench); help leaves it
// out.
type refusedFlag struct{ value string }

func (f *refusedFlag) String() string     { return f.value }
func (f *refusedFlag) Set(s string) error { f.value = s; return nil }

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// say writes text to w as a paragraph of lines that fit helpWidth, the
// lines after the first indented.
func say(w io.Writer, text string) {
	fmt.Fprintln(w, strings.TrimPrefix(wrap(text, 2), "  "))
}

// wrap breaks text into lines of at most helpWidth columns (longer words
// stay whole), each indented by indent spaces.
func wrap(text string, indent int) string {
	var (
		b    strings.Builder
		line int
	)
	pad := strings.Repeat(" ", indent)
	for _, w := range strings.Fields(text) {
		n := utf8.RuneCountInString(w)
		if line > 0 && line+1+n > helpWidth {
			b.WriteByte('\n')
			line = 0
		}
		if line == 0 {
			b.WriteString(pad)
			line = indent
		} else {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += n
	}
	return b.String()
}
