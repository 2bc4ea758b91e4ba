package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// strongToken and strongHookToken pass tokenWeakness: 32 random bytes in
// hex, as the docs say to make one.
const (
	strongToken     = "9f3c1a7e5b2d48c6a0e4f7b19d3c5a82e6f0b4d7a1c9e3f5b8d2a6c0e4f7b1d3"
	strongHookToken = "4b7e2d9a1c6f03e8b5a7d2c9f1e4a6b80d3c7f5e9a2b6d1c8e4f0a7b3d5c9e2f"
)

// tok is a token that passes tokenWeakness, named by label: the hex of its
// SHA-256.
func tok(label string) string {
	sum := sha256.Sum256([]byte(label))
	return hex.EncodeToString(sum[:])
}

// TestWeakTokensAreRefused: a configured token shorter than 32 characters
// or visibly weak stops the start, naming the variable (and its _FILE) and
// never the value; the tokens people make as the docs say, and the ones
// the service generates, pass.
func TestWeakTokensAreRefused(t *testing.T) {
	refused := []struct{ name, token, why string }{
		{"one character", "b", "is 1 characters long"},
		{"31 characters", "k3J9xQ2mL7vR4tY8wZ1pN6sD0fG5hB2", "is 31 characters long"},
		{"one character repeated", strings.Repeat("a", 40), "repeats a pattern of 1"},
		{"a short pattern repeated", strings.Repeat("Xy7#", 10), "repeats a pattern of 4"},
		{"a word repeated", strings.Repeat("hunter2-", 5), "repeats a pattern of 8"},
		{"few characters", "abababbbaabbbababababababbbaaabba", "uses only 2 different"},
		{"a run of neighbours", "abcdefghijklmnopqrstuvwxyz0123456789", "is mostly a run of neighbouring characters"},
		{"32 decimal digits", "84019327561048392756104839275610", "holds at most 106 bits"},
		{"38 decimal digits", "84019327561048392756104839275610482913", "holds at most 126 bits"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"RETRYAUDIT_TOKEN", "RETRYAUDIT_HOOK_TOKEN"} {
				_, err := loadConfig(env(map[string]string{name: tc.token}))
				if err == nil || !strings.Contains(err.Error(), name+": the token "+tc.why) {
					t.Errorf("%s=%q: err = %v, want %q", name, tc.token, err, tc.why)
				}
				if err != nil && len(tc.token) > 1 && strings.Contains(err.Error(), tc.token) {
					t.Errorf("the message echoes the token: %v", err)
				}
			}
		})
	}
	t.Run("from a file, the message names the file's variable", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "token")
		os.WriteFile(path, []byte("short\n"), 0o600)
		_, err := loadConfig(env(map[string]string{"RETRYAUDIT_HOOK_TOKEN_FILE": path}))
		if err == nil || !strings.Contains(err.Error(), "RETRYAUDIT_HOOK_TOKEN: the token (read from RETRYAUDIT_HOOK_TOKEN_FILE) is 5 characters long") ||
			!strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("an instance's tokens", func(t *testing.T) {
		_, err := loadConfig(env(map[string]string{"RETRYAUDIT_TOKEN": strongToken, "RETRYAUDIT_N8N_INSTANCES": "staging",
			"RETRYAUDIT_N8N_STAGING_TOKEN": "staging-token", "RETRYAUDIT_N8N_STAGING_HOOK_TOKEN": strings.Repeat("z", 32)}))
		if err == nil || !strings.Contains(err.Error(), "RETRYAUDIT_N8N_STAGING_TOKEN: the token is 13 characters") ||
			!strings.Contains(err.Error(), "RETRYAUDIT_N8N_STAGING_HOOK_TOKEN: the token repeats") {
			t.Errorf("err = %v", err)
		}
	})

	accepted := map[string]string{
		"openssl rand -hex 32":        strongToken,
		"openssl rand -hex 16":        "c0ffee7a91b24d3e8f6a5b0c1d2e3f47",
		"openssl rand -base64 24":     "q8Z1v+Tn3Kx0Rb/7YwM2LcP9dA4sH6jE",
		"generated (base64url of 32)": "Gk3v9Qx_2mTz8LpR-4nWb7Yc1sHd6fJa0eUi5oPq3rA",
		"a UUID":                      "3f2b8c1e-9a4d-4e7b-b6c5-0d1a2e3f4b5c",
		"39 decimal digits":           "840193275610483927561048392756104829137",
	}
	for name, token := range accepted {
		if why := tokenWeakness(token); why != "" {
			t.Errorf("%s (%q) refused: %s", name, token, why)
		}
	}
	for range 1000 {
		tok, _, err := dataSecret(t.TempDir(), "token")
		if err != nil {
			t.Fatal(err)
		}
		if why := tokenWeakness(tok); why != "" {
			t.Fatalf("a generated token %q is refused: %s", tok, why)
		}
	}
}
