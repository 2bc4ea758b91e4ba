package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// No container can run on the machines that test this: TestComposeFile
// checks deploy/compose.yaml by reading it the way docker compose does
// (compose-go, the library docker compose is built on: the schema, the
// interpolation of .env), then holds what it says against the code.

// loadCompose loads deploy/compose.yaml with env as its .env.
func loadCompose(t *testing.T, envFile string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"../../deploy/compose.yaml"},
		cli.WithWorkingDirectory("../../deploy"), cli.WithEnvFiles(envFile), cli.WithDotEnv)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

func composeService(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("compose.yaml has no service %s", name)
	}
	return s
}

// environ is a service's environment as plain strings.
func environ(s types.ServiceConfig) map[string]string {
	out := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// hooksFile is n8n's hook file that compose.yaml mounts; it arrives with
// the hooks branch, and the checks that need it wait for it.
const hooksFile = "../../n8n/retryaudit-hooks.js"

func hooksFileHere(t *testing.T) bool {
	_, err := os.Stat(hooksFile)
	return !errors.Is(err, fs.ErrNotExist)
}

func TestComposeFile(t *testing.T) {
	p, err := loadCompose(t, "../../deploy/.env.example")
	if err != nil {
		t.Fatalf("docker compose would refuse compose.yaml with .env.example: %v", err)
	}
	ra, n8n, runner, pg := composeService(t, p, "retryaudit"), composeService(t, p, "n8n"), composeService(t, p, "n8n-runner"), composeService(t, p, "postgres")
	raEnv, n8nEnv := environ(ra), environ(n8n)

	t.Run("every RETRYAUDIT variable retryaudit gets is one the configuration reads", func(t *testing.T) {
		read := configNames(raEnv)
		for name := range raEnv {
			if !strings.HasPrefix(name, "RETRYAUDIT_") || read[name] {
				continue
			}
			if strings.HasPrefix(name, "RETRYAUDIT_HOOK_TOKEN") && !hooksFileHere(t) {
				t.Logf("%s waits for the hooks branch (its configuration and %s)", name, hooksFile)
				continue
			}
			t.Errorf("compose.yaml sets %s for retryaudit; the configuration never reads it", name)
		}
	})
	t.Run("n8n loads the shipped hooks file, configured by the variables it reads", func(t *testing.T) {
		target := n8nEnv["EXTERNAL_HOOK_FILES"]
		var mounted bool
		for _, v := range n8n.Volumes {
			if v.Target == target {
				want, _ := filepath.Abs(hooksFile)
				mounted = v.Type == types.VolumeTypeBind && v.Source == want && v.ReadOnly
			}
		}
		if target == "" || !mounted {
			t.Errorf("EXTERNAL_HOOK_FILES=%q is not n8n/retryaudit-hooks.js mounted read-only", target)
		}
		if !hooksFileHere(t) {
			t.Skipf("%s is not in this tree yet (branch hooks)", hooksFile)
		}
		src, err := os.ReadFile(hooksFile)
		if err != nil {
			t.Fatal(err)
		}
		reads := map[string]bool{}
		for _, m := range regexp.MustCompile(`env\.(RETRYAUDIT_[A-Z0-9_]+)`).FindAllStringSubmatch(string(src), -1) {
			reads[m[1]] = true
		}
		for name := range n8nEnv {
			if strings.HasPrefix(name, "RETRYAUDIT_") && !reads[name] {
				t.Errorf("compose.yaml sets %s for n8n; the hooks file never reads it", name)
			}
		}
	})
	t.Run("the URLs between the services agree", func(t *testing.T) {
		servicePort := func(s types.ServiceConfig, port string) bool {
			for _, pc := range s.Ports {
				if pc.Target != 0 && strings.TrimSpace(port) == itoa(pc.Target) {
					return true
				}
			}
			return false
		}
		// retryaudit listens on the image's 0.0.0.0:8080 unless compose moves it.
		raPort := "8080"
		if addr := raEnv["RETRYAUDIT_ADDR"]; addr != "" {
			raPort = addr[strings.LastIndex(addr, ":")+1:]
		}
		for _, c := range []struct{ what, raw, host, port, path string }{
			{"n8n's RETRYAUDIT_URL", n8nEnv["RETRYAUDIT_URL"], "retryaudit", raPort, ""},
			{"retryaudit's RETRYAUDIT_N8N_API_URL", raEnv["RETRYAUDIT_N8N_API_URL"], "n8n", "5678", "/api/v1"},
			{"the runner's N8N_RUNNERS_TASK_BROKER_URI", environ(runner)["N8N_RUNNERS_TASK_BROKER_URI"], "n8n", "5679", ""},
		} {
			u, err := url.Parse(c.raw)
			if err != nil || u.Hostname() != c.host || u.Port() != c.port || strings.TrimRight(u.Path, "/") != c.path {
				t.Errorf("%s is %q, want http://%s:%s%s", c.what, c.raw, c.host, c.port, c.path)
			}
		}
		if !servicePort(ra, raPort) || !servicePort(n8n, "5678") {
			t.Errorf("retryaudit publishes %v (it listens on %s), n8n %v (5678)", ra.Ports, raPort, n8n.Ports)
		}
		if raEnv["RETRYAUDIT_N8N_EDITOR_URL"] == "" || raEnv["RETRYAUDIT_N8N_EDITOR_URL"] != n8nEnv["N8N_EDITOR_BASE_URL"] {
			t.Errorf("retryaudit links executions at %q; n8n's editor is %q", raEnv["RETRYAUDIT_N8N_EDITOR_URL"], n8nEnv["N8N_EDITOR_BASE_URL"])
		}
		if n8nEnv["DB_POSTGRESDB_HOST"] != "postgres" || n8nEnv["DB_POSTGRESDB_DATABASE"] != environ(pg)["POSTGRES_DB"] ||
			n8nEnv["DB_POSTGRESDB_USER"] != environ(pg)["POSTGRES_USER"] {
			t.Errorf("n8n's database %s/%s as %s is not the postgres service's", n8nEnv["DB_POSTGRESDB_HOST"],
				n8nEnv["DB_POSTGRESDB_DATABASE"], n8nEnv["DB_POSTGRESDB_USER"])
		}
		if a, b := n8nEnv["N8N_RUNNERS_AUTH_TOKEN"], environ(runner)["N8N_RUNNERS_AUTH_TOKEN"]; a == "" || a != b {
			t.Error("n8n and its runner do not share N8N_RUNNERS_AUTH_TOKEN")
		}
		for _, s := range []types.ServiceConfig{ra, n8n, runner, pg} {
			if _, ok := s.Networks["beside-n8n"]; !ok || len(s.Networks) != 1 {
				t.Errorf("%s is on the networks %v, want beside-n8n alone", s.Name, s.Networks)
			}
		}
	})
	t.Run("secrets come from files, and the shared ones are the same file", func(t *testing.T) {
		secretAt := map[string]map[string]string{} // service → mount path → secret
		for _, s := range []types.ServiceConfig{ra, n8n, runner, pg} {
			secretAt[s.Name] = map[string]string{}
			for _, sc := range s.Secrets {
				target := sc.Target
				if target == "" {
					target = sc.Source
				}
				if !strings.HasPrefix(target, "/") {
					target = "/run/secrets/" + target
				}
				secretAt[s.Name][target] = sc.Source
				if p.Secrets[sc.Source].File == "" {
					t.Errorf("the secret %s is not a file", sc.Source)
				}
			}
			for k, v := range environ(s) {
				if strings.HasSuffix(k, "_FILE") && k != "EXTERNAL_HOOK_FILES" && secretAt[s.Name][v] == "" {
					t.Errorf("%s's %s=%s is not one of its secrets", s.Name, k, v)
				}
			}
		}
		if a, b := secretAt["retryaudit"][raEnv["RETRYAUDIT_HOOK_TOKEN_FILE"]], secretAt["n8n"][n8nEnv["RETRYAUDIT_HOOK_TOKEN_FILE"]]; a == "" || a != b {
			t.Errorf("retryaudit's hook token is the secret %q, n8n's %q", a, b)
		}
		if a, b := secretAt["n8n"][n8nEnv["DB_POSTGRESDB_PASSWORD_FILE"]], secretAt["postgres"][environ(pg)["POSTGRES_PASSWORD_FILE"]]; a == "" || a != b {
			t.Errorf("n8n's database password is the secret %q, PostgreSQL's %q", a, b)
		}
		for _, s := range []types.ServiceConfig{ra, n8n} {
			for k := range environ(s) {
				if regexp.MustCompile(`(TOKEN|KEY|PASSWORD|SECRET)$`).MatchString(k) && k != "N8N_RUNNERS_AUTH_TOKEN" {
					t.Errorf("%s's %s is given in the environment, not from a file", s.Name, k)
				}
			}
		}
	})
	t.Run("images are pinned, n8n to the version the tests run", func(t *testing.T) {
		n8nVersion := e2eN8NVersion(t)
		if ra.Image != "retryaudit:latest" {
			t.Errorf("retryaudit's image is %q with .env.example: make image tags retryaudit:latest", ra.Image)
		}
		// retryaudit's is the image make image built (pull_policy never,
		// below): latest is the one loaded last.
		for _, s := range []types.ServiceConfig{n8n, runner, pg} {
			_, tag, ok := strings.Cut(s.Image[strings.LastIndex(s.Image, "/")+1:], ":")
			if !ok || tag == "" || tag == "latest" || tag == "stable" || strings.Count(tag, ".") < 1 {
				t.Errorf("%s's image %q is not pinned to a version", s.Name, s.Image)
			}
		}
		for _, s := range []types.ServiceConfig{n8n, runner} {
			if !strings.HasSuffix(s.Image, ":"+n8nVersion) {
				t.Errorf("%s's image %q is not n8n %s, which make test-n8n runs", s.Name, s.Image, n8nVersion)
			}
		}
		if ra.PullPolicy != types.PullPolicyNever {
			t.Errorf("retryaudit's pull_policy is %q: no registry has the image, make image builds it", ra.PullPolicy)
		}
		empty := filepath.Join(t.TempDir(), ".env")
		os.WriteFile(empty, nil, 0o644)
		if _, err := loadCompose(t, empty); err == nil || !strings.Contains(err.Error(), "RETRYAUDIT_IMAGE") {
			t.Errorf("without .env, compose.yaml loads (%v): RETRYAUDIT_IMAGE must be set, never defaulted", err)
		}
	})
	t.Run("docker-compose 1.29 reads it: no top-level name, the project's name from .env", func(t *testing.T) {
		raw, err := os.ReadFile("../../deploy/compose.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if regexp.MustCompile(`(?m)^name:`).Match(raw) || p.Name != "retryaudit" {
			t.Errorf("project name %q; a top-level name: in compose.yaml is refused by docker-compose 1.29", p.Name)
		}
	})
	t.Run("volumes for all three, healthchecks for all three", func(t *testing.T) {
		want := map[string]string{"retryaudit": "/data", "n8n": "/home/node/.n8n", "postgres": "/var/lib/postgresql/data"}
		for _, s := range []types.ServiceConfig{ra, n8n, pg} {
			found := false
			for _, v := range s.Volumes {
				found = found || (v.Type == types.VolumeTypeVolume && v.Target == want[s.Name])
			}
			if !found {
				t.Errorf("%s keeps %s in no named volume", s.Name, want[s.Name])
			}
			if s.Name != "retryaudit" && (s.HealthCheck == nil || len(s.HealthCheck.Test) < 2 || s.HealthCheck.Disable) {
				t.Errorf("%s has no healthcheck", s.Name)
			}
		}
		// retryaudit runs its image's HEALTHCHECK (TestImage): one given
		// here, podman-compose 1.0.3 would run through /bin/sh, which the
		// image does not have.
		if ra.HealthCheck != nil {
			t.Errorf("retryaudit's healthcheck is %q in compose.yaml: leave it to the image's", ra.HealthCheck.Test)
		}
	})
}

// configNames returns the names loadConfig reads given env: the
// configuration's own code says which variables exist.
func configNames(env map[string]string) map[string]bool {
	read := map[string]bool{}
	loadConfig(func(k string) string {
		read[k] = true
		if strings.HasSuffix(k, "_FILE") {
			return "" // the paths are the container's
		}
		return env[k]
	})
	return read
}

// e2eN8NVersion is the n8n version e2e/package.json pins for make test-n8n.
func e2eN8NVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../e2e/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil || pkg.Dependencies["n8n"] == "" {
		t.Fatalf("e2e/package.json pins no n8n: %v", err)
	}
	return pkg.Dependencies["n8n"]
}

func itoa(n uint32) string {
	b, _ := json.Marshal(n)
	return string(b)
}
