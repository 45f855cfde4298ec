package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale"
)

// execute runs args, reports a failure on stderr in one line (a usage
// error adds the usage when no command was given) and returns the exit
// status: 0, 1 when the command failed, 2 for a usage error.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	if err == nil {
		return 0
	}
	ue, ok := errors.AsType[*usageError](err)
	if !ok {
		fmt.Fprintln(stderr, "flashsale:", errorText(err))
		return 1
	}
	if ue.cmd == nil || ue.cmd.Name == "" {
		fmt.Fprintln(stderr, "flashsale:", errorText(ue.err))
		if ue.usage != "" {
			fmt.Fprintln(stderr)
			fmt.Fprint(stderr, ue.usage)
		}
		return 2
	}
	fmt.Fprintf(stderr, "flashsale %s: %s (see: flashsale help %s)\n", ue.cmd.Name, errorText(ue.err), ue.cmd.Name)
	return 2
}

// usageError is an error in how a command was called: a flag value, a
// stray argument, an unknown command. cmd is the command called, nil or
// the root when none was recognised; usage, if any, is printed after it.
type usageError struct {
	cmd   *ffcli.Command
	err   error
	usage string
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// unknownCommand is the usage error of a command name root does not have:
// one line that names the commands, not the whole usage.
func unknownCommand(root *ffcli.Command, name string) error {
	names := make([]string, len(root.Subcommands))
	for i, c := range root.Subcommands {
		names[i] = c.Name
	}
	return &usageError{cmd: root, err: fmt.Errorf("unknown command %q; the commands are %s (see: flashsale help)", name, strings.Join(names, ", "))}
}

// usage marks err as a usage error of the command being run.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err: err}
}

// run parses args and runs the chosen command until it ends or ctx is
// cancelled. Help asked for (--help, flashsale help) is printed on stdout
// and returns nil.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &ffcli.Command{
		ShortUsage: "flashsale <command> [flags]",
		ShortHelp:  "a flash-sale service on Redis and MySQL, and its load lab",
		LongHelp:   "Run `flashsale help <command>` for a command's flags. Every flag can also be set by the FLASHSALE_* environment variable it names (demo reads none).",
		Subcommands: []*ffcli.Command{
			serveCommand(stdout, stderr),
			consumeCommand(stdout, stderr),
			reconcileCommand(stdout, stderr),
			tokenCommand(stdout),
			jwksCommand(stdout),
			benchCommand(stdout, stderr),
			demoCommand(stdout, stderr),
		},
		FlagSet: flag.NewFlagSet("flashsale", flag.ContinueOnError),
	}
	showVersion := root.FlagSet.Bool("version", false, "print the version and exit")
	root.Subcommands = append(root.Subcommands, helpCommand(root, stdout), versionCommand(stdout))
	root.Exec = func(_ context.Context, args []string) error {
		switch {
		case *showVersion:
			_, err := fmt.Fprintln(stdout, versionLine())
			return err
		case len(args) > 0:
			return unknownCommand(root, args[0])
		}
		return &usageError{err: errors.New("no command given"), usage: usageText(root)}
	}
	// The flag package would print every error and the whole usage; the
	// errors are reported once, by execute.
	for _, c := range append([]*ffcli.Command{root}, root.Subcommands...) {
		c.FlagSet.SetOutput(io.Discard)
		c.UsageFunc = usageText
	}
	if err := root.Parse(args); err != nil {
		cmd := calledCommand(root)
		if errors.Is(err, flag.ErrHelp) {
			_, err := fmt.Fprint(stdout, usageText(cmd))
			return err
		}
		return &usageError{cmd: cmd, err: flagError(err), usage: usageText(cmd)}
	}
	err := root.Run(ctx)
	if ue, ok := errors.AsType[*usageError](err); ok && ue.cmd == nil {
		ue.cmd = calledCommand(root)
	}
	return err
}

// calledCommand returns the command whose flags were parsed last: the
// subcommand when one was named, else the root.
func calledCommand(root *ffcli.Command) *ffcli.Command {
	for _, c := range root.Subcommands {
		if c.FlagSet.Parsed() {
			return c
		}
	}
	return root
}

// flagError drops ff's "error parsing commandline arguments" preamble and
// names flags as the help does, --name: the flag package writes -name.
func flagError(err error) error {
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), "error parsing commandline arguments: ") {
		err = inner
	}
	if msg := err.Error(); flagNames.Replace(msg) != msg {
		return errors.New(flagNames.Replace(msg))
	}
	return err
}

// flagNames rewrites the flag package's messages (flag.FlagSet.failf) to
// name a flag --name.
var flagNames = strings.NewReplacer(
	"flag provided but not defined: -", "unknown flag --",
	"flag needs an argument: -", "flag needs an argument: --",
	" for flag -", " for flag --",
	" for -", " for --", // invalid boolean value "x" for -name
)

// noArgs adapts exec to an ffcli Exec that refuses arguments left after
// the flags: the flag package stops at the first word that is not a flag
// (a bare "false" after a boolean flag), and every flag after it would be
// dropped without a word. The error is a usage error.
func noArgs(exec func(ctx context.Context) error) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usage(fmt.Errorf("unexpected argument %q; the flags after it were not read (write a boolean as --flag=false)", args[0]))
		}
		return exec(ctx)
	}
}

// envOptions makes every flag settable as FLASHSALE_<FLAG> (dashes become
// underscores).
func envOptions() []ff.Option {
	return []ff.Option{ff.WithEnvVarPrefix("FLASHSALE")}
}

// envName is the environment variable envOptions reads for a flag.
func envName(flagName string) string {
	return "FLASHSALE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// helpCommand is `flashsale help [command]`.
func helpCommand(root *ffcli.Command, stdout io.Writer) *ffcli.Command {
	return &ffcli.Command{
		Name:       "help",
		ShortUsage: "flashsale help [command]",
		ShortHelp:  "print the usage of flashsale or of one command",
		FlagSet:    flag.NewFlagSet("flashsale help", flag.ContinueOnError),
		Exec: func(_ context.Context, args []string) error {
			cmd := root
			if len(args) > 1 {
				return usage(fmt.Errorf("help takes one command, got %q", args))
			}
			if len(args) == 1 {
				cmd = nil
				for _, c := range root.Subcommands {
					if strings.EqualFold(c.Name, args[0]) {
						cmd = c
					}
				}
				if cmd == nil {
					return unknownCommand(root, args[0])
				}
			}
			_, err := fmt.Fprint(stdout, usageText(cmd))
			return err
		},
	}
}

// versionCommand is `flashsale version`, the same as `flashsale --version`.
func versionCommand(stdout io.Writer) *ffcli.Command {
	return &ffcli.Command{
		Name:       "version",
		ShortUsage: "flashsale version",
		ShortHelp:  "print the module version and VCS revision of this binary",
		FlagSet:    flag.NewFlagSet("flashsale version", flag.ContinueOnError),
		Exec: noArgs(func(context.Context) error {
			_, err := fmt.Fprintln(stdout, versionLine())
			return err
		}),
	}
}

// versionLine is what this binary's build recorded (see buildLine).
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "flashsale (no build information)"
	}
	return buildLine(bi)
}

// buildLine is the module version, the VCS revision and time (and whether
// the tree had changes), the Go version. A build without a revision says
// why there is none rather than leaving it out.
func buildLine(bi *debug.BuildInfo) string {
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	line := "flashsale " + bi.Main.Version
	rev := vcs["vcs.revision"]
	if rev == "" {
		return line + ", revision unknown: built without VCS stamping (-buildvcs=false or not in a git checkout), " + bi.GoVersion
	}
	line += ", revision " + rev
	if vcs["vcs.modified"] == "true" {
		line += " (modified)"
	}
	if t := vcs["vcs.time"]; t != "" {
		line += " of " + t
	}
	return line + ", " + bi.GoVersion
}

// errorText is err's message for a terminal. The domain's *flashsale.Error
// reads as its message alone: its "flashsale: <code>: " would repeat the
// program's prefix. An unavailable or busy one that wraps a cause gives way
// to the cause: "try again shortly" is an HTTP answer's wording, not a
// reason a command could not start.
func errorText(err error) string {
	msg := err.Error()
	fe, ok := errors.AsType[*flashsale.Error](err)
	if !ok {
		return msg
	}
	full := fe.Error()
	if (fe.Code == flashsale.EUnavailable || fe.Code == flashsale.EBusy) && strings.Contains(msg, full+": ") {
		return strings.Replace(msg, full+": ", "", 1)
	}
	return strings.Replace(msg, full, fe.Message, 1)
}
