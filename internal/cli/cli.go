// Package cli holds what the dic and divm commands share: subcommand dispatch, exit
// codes, and flag parsing that accepts flags before and after positional arguments.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// UsageError is a command-line mistake: the command exits with code 2.
type UsageError struct{ Err error }

func (u UsageError) Error() string { return u.Err.Error() }
func (u UsageError) Unwrap() error { return u.Err }

// Parse parses fs from args, accepting flags before and after positional arguments, and
// returns the positional arguments. A flag error is a UsageError.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, UsageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// Main runs the subcommand named by os.Args[1]: help prints usage; an unknown name
// or a UsageError exits 2, any other error 1, each with one line "prog: message" on
// stderr.
func Main(prog string, usage func(), cmds map[string]func(args []string) error) {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	switch name {
	case "-h", "--help", "help":
		usage()
		return
	}
	run, ok := cmds[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: unknown command %q\n", prog, name)
		usage()
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		var u UsageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
