package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestSlackAppManifests: the manifests in deploy/ create an app with the
// scopes retryaudit uses, interactivity on, one over Socket Mode and one
// posting to POST /slack/interactions.
func TestSlackAppManifests(t *testing.T) {
	for file, socket := range map[string]bool{"slack-app-manifest.yaml": true, "slack-app-manifest-http.yaml": false} {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile("../../deploy/" + file)
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				OAuth struct {
					Scopes struct {
						Bot []string `yaml:"bot"`
					} `yaml:"scopes"`
				} `yaml:"oauth_config"`
				Settings struct {
					Interactivity struct {
						Enabled    bool   `yaml:"is_enabled"`
						RequestURL string `yaml:"request_url"`
					} `yaml:"interactivity"`
					Socket bool `yaml:"socket_mode_enabled"`
				} `yaml:"settings"`
			}
			if err := yaml.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			for _, scope := range []string{"chat:write", "channels:history", "groups:history"} {
				if !slices.Contains(m.OAuth.Scopes.Bot, scope) {
					t.Errorf("no bot scope %s: %v", scope, m.OAuth.Scopes.Bot)
				}
			}
			in := m.Settings.Interactivity
			if !in.Enabled || m.Settings.Socket != socket ||
				(socket != (in.RequestURL == "")) || (!socket && !strings.HasSuffix(in.RequestURL, "/slack/interactions")) {
				t.Errorf("settings %+v", m.Settings)
			}
		})
	}
}
