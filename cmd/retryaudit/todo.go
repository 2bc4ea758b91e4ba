package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/retryaudit/retryaudit/audit"
	"github.com/retryaudit/retryaudit/handlers"
)

const checkUsage = ""

func check(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, out io.Writer) error {
	return errors.New("check: not built yet")
}

func uiConfig(ctx context.Context, cfg config, s *audit.Store, out io.Writer) (handlers.UIConfig, error) {
	return handlers.UIConfig{}, nil
}
