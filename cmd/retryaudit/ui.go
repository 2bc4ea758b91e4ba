package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"golang.org/x/crypto/bcrypt"

	"github.com/retryaudit/retryaudit/audit/store"
	"github.com/retryaudit/retryaudit/handlers"
)

// uiConfig says who may read the pages: the users of RETRYAUDIT_UI_USERS,
// the proxy's header of RETRYAUDIT_UI_TRUST_HEADER, or else one admin whose
// password is generated at first start, kept in the data dir and printed
// once. The CSRF key lives in the database, so that instances share it.
func uiConfig(ctx context.Context, cfg config, s *store.Store, out io.Writer) (handlers.UIConfig, error) {
	ui := handlers.UIConfig{TrustHeader: cfg.UITrustHeader, Users: cfg.UIUsers, TrustedProxies: cfg.UITrustedProxies}
	if cfg.BaseURL != "" {
		ui.TrustedOrigins = []string{origin(cfg.BaseURL)}
	}
	if ui.TrustHeader != "" || len(ui.Users) > 0 {
		return ui, nil
	}
	pass, created, err := dataSecret(cfg.DataDir, "ui-password")
	if err != nil {
		return ui, fmt.Errorf("RETRYAUDIT_UI_USERS is unset and the generated password is unusable: %w", err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.DefaultCost)
	if err != nil {
		return ui, err
	}
	ui.Users = map[string][]byte{"admin": hash}
	switch {
	case created && isTerminal(out):
		fmt.Fprintf(out, "retryaudit: generated the pages' password (kept in %s/ui-password, mode 0600; printed only now).\n"+
			"  Sign in as admin with %s\n", cfg.DataDir, pass)
	case created:
		fmt.Fprintf(out, "retryaudit: generated the pages' password into %s (mode 0600); sign in as admin with it\n",
			filepath.Join(cfg.DataDir, "ui-password"))
	default:
		fmt.Fprintf(out, "retryaudit: the pages' password (user admin) is kept in %s\n", filepath.Join(cfg.DataDir, "ui-password"))
	}
	return ui, nil
}
