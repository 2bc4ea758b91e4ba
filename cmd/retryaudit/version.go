package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and revision are set at build time (make build, make image):
// -ldflags "-X main.version=… -X main.revision=…". A binary built without
// them reports the revision Go recorded from the checkout, if any.
var (
	version  = "dev"
	revision = ""
)

// buildRevision returns the revision set at build time, or the one the Go
// toolchain stamped from version control ("+dirty" when the tree had
// changes), or "unknown".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "true" {
		rev += "+dirty"
	}
	return cmp.Or(rev, "unknown")
}

func printVersion(_ context.Context, fs *flag.FlagSet, args []string, _ func(string) string, out io.Writer) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintf(out, "retryaudit %s\nrevision   %s\ngo         %s %s/%s\n", version, buildRevision(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
