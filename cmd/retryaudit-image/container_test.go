package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestContainer runs the image in a container, as deploy/compose.yaml runs
// it: podman loads the tar make image writes (RETRYAUDIT_TEST_IMAGE names
// one, else the test runs make image), and runs the tag deploy/.env.example
// names with a read-only root, no capabilities, no new privileges, a tmpfs
// on /tmp, a volume on /data, the port on 127.0.0.1 and the image's own user
// (65532). It claims through it with the token the container generated
// (read from the volume), waits for the image's HEALTHCHECK to call it
// healthy, stops it (it drains and exits 0) and removes it. podman keeps
// what it loads in a store of the test's own, removed at the end: the
// machine's images and containers are not touched.
//
// Where podman is installed the test runs, and fails when the container
// cannot; without podman it skips, or fails when
// RETRYAUDIT_TEST_REQUIRE_PODMAN=1 (make test, which installs it). It runs
// podman with runc when runc is installed (crun refuses the rlimits of some
// sandboxes) and with the ulimits such a sandbox allows.
func TestContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image (make image) and runs it")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		if os.Getenv("RETRYAUDIT_TEST_REQUIRE_PODMAN") == "1" {
			t.Fatal("podman is required (RETRYAUDIT_TEST_REQUIRE_PODMAN=1) but was not found: apt-get install podman runc")
		}
		t.Skip("no podman (apt-get install podman runc)")
	}
	began := time.Now()
	image := os.Getenv("RETRYAUDIT_TEST_IMAGE")
	if image == "" {
		image = makeImage(t, t.TempDir())
	}
	built := time.Now()
	p := newPodman(t, podman)

	loaded := p.run(t, "load", "-i", image)
	tag := envExample(t, "RETRYAUDIT_IMAGE")
	if !strings.Contains(loaded, "/"+tag+"\n") {
		t.Errorf("podman load loaded\n%s\nnot %s, which deploy/.env.example names", loaded, tag)
	}
	suffix := randomSuffix()
	name, volume := "retryaudit-test-"+suffix, "retryaudit-test-"+suffix
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	p.run(t, "volume", "create", volume)
	t.Cleanup(func() { p.cmd("volume", "rm", "-f", volume).Run() })
	args := []string{"run", "-d", "--name", name,
		"--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096",
		"--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", volume + ":/data", "-p", "127.0.0.1:" + port + ":8080", "-e", "RETRYAUDIT_BASE_URL=" + base, tag}
	if runc := lookRunc(); runc != "" {
		args = append([]string{args[0], "--runtime", runc}, args[1:]...)
	}
	p.run(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := p.cmd("logs", name).CombinedOutput()
			t.Logf("the container's log:\n%s", out)
		}
		p.cmd("rm", "-f", "-t", "0", name).Run()
	})

	var ready bool
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !ready; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}
	if !ready {
		t.Fatalf("the container does not answer /readyz ready on %s within 60s", base)
	}
	if user := strings.TrimSpace(p.run(t, "top", name, "huser")); !strings.HasSuffix(user, "\n65532") {
		t.Errorf("serve runs as %q in the container, want 65532", user)
	}

	token := p.file(t, name, "/data/token")
	claim := func(exec string) (int, string) {
		req, _ := http.NewRequest("POST", base+"/v1/claims", strings.NewReader(
			`{"source":"shop","event_id":"order-1042","execution_id":"`+exec+`","workflow_id":"wf1"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := claim("4711"); code != http.StatusOK || !strings.Contains(body, `"decision":"claimed"`) {
		t.Errorf("first claim: %d %s", code, body)
	}
	if code, body := claim("4712"); code != http.StatusOK || !strings.Contains(body, `"decision":"in_progress"`) {
		t.Errorf("second claim: %d %s", code, body)
	}

	// The image's HEALTHCHECK, run as podman's timer would (there is no
	// systemd here to run the timer).
	health := ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && health != "healthy"; time.Sleep(time.Second) {
		p.cmd("healthcheck", "run", name).Run()
		health = strings.TrimSpace(p.run(t, "inspect", "--format", "{{.State.Health.Status}}", name))
	}
	if health != "healthy" {
		out, _ := p.cmd("healthcheck", "run", name).CombinedOutput()
		t.Errorf("the healthcheck says %q (podman healthcheck run: %s)", health, out)
	}

	p.run(t, "stop", "-t", "45", name)
	if code := strings.TrimSpace(p.run(t, "inspect", "--format", "{{.State.ExitCode}}", name)); code != "0" {
		t.Errorf("serve exited %s at stop, want 0", code)
	}
	p.run(t, "rm", name)
	t.Logf("make image %s; podman load, run, claims, healthy, stopped and removed in %s",
		built.Sub(began).Round(time.Second), time.Since(built).Round(100*time.Millisecond))
}

// podmanStore runs podman on a store of the test's own.
type podmanStore struct {
	bin  string
	args []string // --root, --runroot, --storage-driver
}

func newPodman(t *testing.T, bin string) *podmanStore {
	t.Helper()
	dir, err := os.MkdirTemp("", "retryaudit-podman-")
	if err != nil {
		t.Fatal(err)
	}
	p := &podmanStore{bin: bin, args: []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs"}}
	t.Cleanup(func() {
		p.cmd("rmi", "-a", "-f").Run()
		if os.Geteuid() != 0 { // rootless: the layers' files belong to the user namespace's ids
			exec.Command(bin, "unshare", "rm", "-rf", dir).Run()
		}
		os.RemoveAll(dir)
	})
	return p
}

func (p *podmanStore) cmd(args ...string) *exec.Cmd {
	return exec.Command(p.bin, append(append([]string{}, p.args...), args...)...)
}

// run runs podman and returns its standard output; it fails the test with
// its error output when podman fails.
func (p *podmanStore) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, append(append([]string{}, p.args...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// file reads a file out of the container (podman cp writes a tar): the
// image has no shell to cat it with.
func (p *podmanStore) file(t *testing.T, container, path string) string {
	t.Helper()
	tr := tar.NewReader(strings.NewReader(p.run(t, "cp", container+":"+path, "-")))
	if _, err := tr.Next(); err != nil {
		t.Fatalf("podman cp %s: %v", path, err)
	}
	b, _ := io.ReadAll(tr)
	return strings.TrimSpace(string(b))
}

// lookRunc finds runc, which Debian installs in /usr/sbin.
func lookRunc() string {
	if p, err := exec.LookPath("runc"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// envExample returns a variable's value in deploy/.env.example.
func envExample(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open("../../deploy/.env.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^` + name + `=(\S+)`)
	for s := bufio.NewScanner(f); s.Scan(); {
		if m := line.FindStringSubmatch(s.Text()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("deploy/.env.example sets no %s", name)
	return ""
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
