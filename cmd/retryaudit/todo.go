package main

import (
	"context"
	"errors"
	"flag"
	"io"
)

const checkUsage = ""

func check(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error {
	return errors.New("check: not built yet")
}
