package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unit reads a systemd unit file: key → values, in order.
func unit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is no key=value", path, line)
		}
		keys[k] = append(keys[k], v)
	}
	return keys
}

// deploySteps returns the README's install steps, one command per line.
func deploySteps(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "<!-- deploy-steps -->")
	block, _, ok2 := strings.Cut(block, "<!-- /deploy-steps -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no deploy-steps block")
	}
	var steps []string
	for _, line := range strings.Split(block, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "```") {
			steps = append(steps, line)
		}
	}
	return steps
}

func step(t *testing.T, steps []string, parts ...string) string {
	t.Helper()
	for _, s := range steps {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return s
		}
	}
	t.Errorf("the README's deploy steps have no step with %q", parts)
	return ""
}

// TestDeployment checks deploy/retryaudit.service and the README's install
// steps against each other, then runs the steps that can run here.
func TestDeployment(t *testing.T) {
	u := unit(t, "../../deploy/retryaudit.service")
	exec1 := strings.Fields(u["ExecStart"][0])
	if len(exec1) != 2 || exec1[1] != "serve" || !filepath.IsAbs(exec1[0]) {
		t.Fatalf("ExecStart = %q, want /path/to/retryaudit serve", u["ExecStart"])
	}
	binary := exec1[0]
	user := u["User"][0]
	if user == "" || user == "root" || u["Group"][0] == "root" {
		t.Errorf("the service runs as %q", user)
	}
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes", "LockPersonality": "yes",
		"ProtectKernelTunables": "yes", "ProtectControlGroups": "yes", "MemoryDenyWriteExecute": "yes",
	} {
		if v, ok := u[key]; !ok || v[0] != want {
			t.Errorf("%s = %q, want %q", key, v, want)
		}
	}
	for _, key := range []string{"SystemCallFilter", "RestrictAddressFamilies", "ReadWritePaths", "StateDirectory"} {
		if len(u[key]) == 0 {
			t.Errorf("no %s", key)
		}
	}
	dataDir := ""
	for _, e := range u["Environment"] {
		if v, ok := strings.CutPrefix(e, "RETRYAUDIT_DATA_DIR="); ok {
			dataDir = v
		}
	}
	if dataDir == "" || u["ReadWritePaths"][0] != dataDir {
		t.Errorf("the data dir %q is not the one writable path %q", dataDir, u["ReadWritePaths"])
	}
	envFile := strings.TrimPrefix(u["EnvironmentFile"][0], "-")

	steps := deploySteps(t)
	build := step(t, steps, "go build", "-o "+binary, "./cmd/retryaudit")
	step(t, steps, "useradd", user)
	step(t, steps, "install", "deploy/retryaudit.env.example", envFile)
	step(t, steps, "install", "deploy/retryaudit.service", "/etc/systemd/system/retryaudit.service")
	step(t, steps, "systemctl enable --now retryaudit")
	step(t, steps, "EnvironmentFile="+envFile, "RETRYAUDIT_DATA_DIR="+dataDir, binary+" check")

	if testing.Short() {
		return
	}
	// The build step as written, into a temporary path, then what the unit
	// and the check step run.
	bin := filepath.Join(t.TempDir(), "retryaudit")
	cmd := exec.Command("sh", "-c", strings.Replace(build, binary, bin, 1))
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	data := t.TempDir()
	env := append(os.Environ(), "RETRYAUDIT_DATA_DIR="+data, "RETRYAUDIT_TOKEN="+tok("deploy-test"))
	for _, args := range [][]string{{"version"}, {"migrate"}, {"check"}, {"serve", "--help"}} {
		c := exec.Command(bin, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("retryaudit %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "check" && !strings.Contains(string(out), "all checks passed") {
			t.Errorf("check:\n%s", out)
		}
	}
}
