// Command retryaudit keeps webhook events from being processed twice by n8n
// workflows: it is the ledger a workflow claims an event in before its
// external action, the target of n8n's error workflow, the sender of Slack
// alerts and the audit pages people resolve unknown outcomes on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "retryaudit:", err)
		os.Exit(1)
	}
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	usage   string // the paragraph --help prints after the summary
	run     func(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "serve the API, the pages and the background jobs (the default)", serveUsage, serve},
		{"migrate", "apply the database migrations and exit", migrateUsage, migrateCmd},
		{"check", "check the installation and run a live drill", checkUsage, check},
		{"connect", "wire retryaudit into a running n8n through n8n's public API", connectUsage, connect},
		{"slack-test", "send one test message with the configured Slack settings", slackTestUsage, slackTest},
		{"healthcheck", "exit 0 when the local service is ready, 1 when not (for HEALTHCHECK)", healthcheckUsage, healthcheck},
		{"version", "print the version, the revision and the Go version", "", printVersion},
	}
}

// run is main without the process: tests call it with their own
// arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	if len(args) > 0 && (isHelp(args[0]) || args[0] == "help") {
		usage(out)
		return nil
	}
	name := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		fs := flag.NewFlagSet("retryaudit "+c.name, flag.ContinueOnError)
		fs.SetOutput(out)
		fs.Usage = func() {
			fmt.Fprintf(out, "usage: retryaudit %s [flags]\n\n%s.\n", c.name, c.summary)
			if c.usage != "" {
				fmt.Fprintf(out, "\n%s\n", c.usage)
			}
			fmt.Fprintln(out, "\nflags:")
			fs.PrintDefaults()
		}
		return c.run(ctx, fs, args, getenv, out)
	}
	usage(out)
	return fmt.Errorf("unknown command %q", name)
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func usage(out io.Writer) {
	fmt.Fprintln(out, "usage: retryaudit [command] [flags]")
	fmt.Fprintln(out, "\nretryaudit keeps webhook events from being processed twice by n8n workflows.")
	fmt.Fprintln(out, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(out, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(out, "\nConfiguration comes from RETRYAUDIT_* environment variables (see docs/configuration.md);")
	fmt.Fprintln(out, "run 'retryaudit COMMAND --help' for a command's flags.")
}
