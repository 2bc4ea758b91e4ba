package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const testVersion = "v9.8.7-image-test"

// makeImage runs make image as the README says, into dir.
func makeImage(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "retryaudit-image.tar")
	cmd := exec.Command("make", "-s", "image", "IMAGE="+out, "IMAGE_BIN="+filepath.Join(dir, "linux", "retryaudit"),
		"VERSION="+testVersion)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, b)
	}
	return out
}

// TestImage builds the image with make image and reads it as the two
// loaders do (docker-archive and OCI layout), checks how it runs, then
// runs the binary taken out of its layer: version, healthcheck and a claim
// through the service it serves. Containers cannot run here; the binary
// can.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image (make image)")
	}
	dir := t.TempDir()
	path := makeImage(t, dir)
	img, err := tarball.ImageFromPath(path, nil) // through manifest.json, as docker load has always read it
	if err != nil {
		t.Fatalf("the docker-archive side: %v", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	files := layerFiles(t, img)

	t.Run("the config runs serve as retryaudit, not root", func(t *testing.T) {
		c := cfg.Config
		if c.User != "65532:65532" || strings.HasPrefix(c.User, "0") || c.User == "" {
			t.Errorf("user %q", c.User)
		}
		if !strings.Contains(files["etc/passwd"].body, "retryaudit:x:65532:65532:") {
			t.Errorf("/etc/passwd does not name 65532 retryaudit:\n%s", files["etc/passwd"].body)
		}
		if !slices.Equal(c.Entrypoint, []string{binaryPath}) || !slices.Equal(c.Cmd, []string{"serve"}) {
			t.Errorf("entrypoint %q, cmd %q", c.Entrypoint, c.Cmd)
		}
		if f, ok := files[strings.TrimPrefix(binaryPath, "/")]; !ok || f.mode&0o111 == 0 {
			t.Errorf("the entrypoint %s is not an executable file in the layer", binaryPath)
		}
		if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
			t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
		}
	})
	t.Run("port 8080, SQLite in the volume /data", func(t *testing.T) {
		c := cfg.Config
		if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 1 {
			t.Errorf("exposed ports %v", c.ExposedPorts)
		}
		if !slices.Contains(c.Env, "RETRYAUDIT_ADDR=0.0.0.0:8080") || !slices.Contains(c.Env, "RETRYAUDIT_DATA_DIR=/data") {
			t.Errorf("env %q", c.Env)
		}
		for _, e := range c.Env {
			if strings.HasPrefix(e, "RETRYAUDIT_DATABASE_URL") {
				t.Errorf("the image sets %s: its default is SQLite in /data", e)
			}
		}
		if _, ok := c.Volumes["/data"]; !ok || len(c.Volumes) != 1 {
			t.Errorf("volumes %v", c.Volumes)
		}
		if d := files["data/"]; d.uid != 65532 || d.mode&0o700 != 0o700 {
			t.Errorf("/data is owned by %d with mode %o: the user retryaudit cannot write it", d.uid, d.mode)
		}
	})
	t.Run("labels and the healthcheck", func(t *testing.T) {
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.source":   "https://github.com/retryaudit/retryaudit",
			"org.opencontainers.image.version":  testVersion,
			"org.opencontainers.image.revision": strings.TrimSpace(string(head)),
		} {
			if got := cfg.Config.Labels[k]; got != want {
				t.Errorf("label %s = %q, want %q", k, got, want)
			}
		}
		hc := cfg.Config.Healthcheck
		if hc == nil || !slices.Equal(hc.Test, []string{"CMD", binaryPath, "healthcheck"}) || hc.Interval <= 0 {
			t.Errorf("healthcheck %+v", hc)
		}
	})
	t.Run("the CA certificates are this machine's", func(t *testing.T) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(files["etc/ssl/certs/ca-certificates.crt"].body)) {
			t.Error("the image has no CA certificates: the service could not reach Slack or an https n8n")
		}
	})
	t.Run("the OCI layout names the same image", func(t *testing.T) {
		checkOCILayout(t, path, img)
	})
	t.Run("the same commit gives the same image", func(t *testing.T) {
		again, err := tarball.ImageFromPath(makeImage(t, t.TempDir()), nil)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := img.ConfigName()
		b, _ := again.ConfigName()
		la, _ := img.Layers()
		lb, _ := again.Layers()
		da, _ := la[0].Digest()
		db, _ := lb[0].Digest()
		if a != b || da != db {
			t.Errorf("two builds differ: config %s and %s, layer %s and %s", a, b, da, db)
		}
	})

	bin := filepath.Join(dir, "retryaudit-from-the-image")
	if err := os.WriteFile(bin, []byte(files[strings.TrimPrefix(binaryPath, "/")].body), 0o755); err != nil {
		t.Fatal(err)
	}
	runBinary(t, bin, cfg.Config.Env)
}

// runBinary runs the binary from the image with the image's environment
// (its port and data folder moved to free ones): version, healthcheck
// before and while serve runs, and a claim.
func runBinary(t *testing.T, bin string, imageEnv []string) {
	addr := "0.0.0.0:" + freePort(t)
	data := t.TempDir()
	var env []string
	for _, e := range imageEnv {
		switch {
		case strings.HasPrefix(e, "RETRYAUDIT_ADDR="):
			e = "RETRYAUDIT_ADDR=" + addr
		case strings.HasPrefix(e, "RETRYAUDIT_DATA_DIR="):
			e = "RETRYAUDIT_DATA_DIR=" + data
		}
		env = append(env, e)
	}
	command := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Env = env
		return c
	}

	out, err := command("version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "retryaudit "+testVersion+"\n") || !strings.Contains(string(out), "go ") {
		t.Errorf("version: %v\n%s", err, out)
	}
	if out, err := command("healthcheck").CombinedOutput(); err == nil {
		t.Errorf("healthcheck passed with nothing listening:\n%s", out)
	}

	serve := command("serve")
	var log bytes.Buffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = serve.Wait(); close(exited) }()
	t.Cleanup(func() {
		serve.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := command("healthcheck").CombinedOutput()
		if err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("serve exited (%v):\n%s", waitErr, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthcheck still fails a minute after serve started: %s\n%s", out, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	token, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		t.Fatalf("serve generated no token in its data folder: %v", err)
	}
	body := `{"source":"image-test","event_id":"order-1","execution_id":"101","workflow_id":"wf1","workflow_name":"image test"}`
	req, _ := http.NewRequest("POST", "http://127.0.0.1:"+strings.TrimPrefix(addr, "0.0.0.0:")+"/v1/claims", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var claim struct {
		Process  bool   `json:"process"`
		Decision string `json:"decision"`
	}
	json.NewDecoder(resp.Body).Decode(&claim)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !claim.Process {
		t.Errorf("the claim was answered %d %+v", resp.StatusCode, claim)
	}
	if _, err := os.Stat(filepath.Join(data, "retryaudit.db")); err != nil {
		t.Errorf("no SQLite database in the data folder: %v", err)
	}

	serve.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("serve ended with %v after SIGTERM:\n%s", waitErr, log.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute of SIGTERM")
	}
	if out, err := command("healthcheck").CombinedOutput(); err == nil {
		t.Errorf("healthcheck passed after serve stopped:\n%s", out)
	}
}

// checkOCILayout reads the tar as an OCI image layout, as podman load and
// Docker 25+ do, and finds the docker-archive's image in it under its full
// name.
func checkOCILayout(t *testing.T, path string, img v1.Image) {
	t.Helper()
	dir := t.TempDir()
	extract(t, path, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// One entry a tag, both of the same manifest: the version, and latest,
	// which deploy/.env.example names.
	if len(m.Manifests) != 2 || m.Manifests[0].Digest != m.Manifests[1].Digest {
		t.Fatalf("index.json has %+v, want the image twice (its version and latest)", m.Manifests)
	}
	for i, tag := range []string{testVersion, "latest"} {
		d, want := m.Manifests[i], "docker.io/library/retryaudit:"+tag
		if d.Annotations["org.opencontainers.image.ref.name"] != want || d.Annotations["io.containerd.image.name"] != want {
			t.Errorf("index.json names the image %v, want %s", d.Annotations, want)
		}
	}
	d := m.Manifests[0]
	if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH {
		t.Errorf("platform %+v", d.Platform)
	}
	oci, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := oci.ConfigName()
	b, _ := img.ConfigName()
	la, _ := oci.Layers()
	lb, _ := img.Layers()
	if a != b || len(la) != 1 || len(lb) != 1 {
		t.Fatalf("the two sides differ: config %s and %s, %d and %d layers", a, b, len(la), len(lb))
	}
	da, _ := la[0].Digest()
	db, _ := lb[0].Digest()
	if da != db {
		t.Errorf("the two sides differ: layer %s and %s", da, db)
	}
}

type layerFile struct {
	body string
	mode int64
	uid  int
}

// layerFiles reads the image's one layer.
func layerFiles(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = layerFile{body: string(b), mode: h.Mode, uid: h.Uid}
	}
}

func extract(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(target, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(target), 0o755)
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestQualified(t *testing.T) {
	for ref, want := range map[string]string{
		"retryaudit:v1.2.3":               "docker.io/library/retryaudit:v1.2.3",
		"acme/retryaudit:v1":              "docker.io/acme/retryaudit:v1",
		"ghcr.io/acme/retryaudit:v1":      "ghcr.io/acme/retryaudit:v1",
		"localhost/retryaudit:v1":         "localhost/retryaudit:v1",
		"registry:5000/retryaudit:v1.0.0": "registry:5000/retryaudit:v1.0.0",
	} {
		if got := qualified(ref); got != want {
			t.Errorf("qualified(%q) = %q, want %q", ref, got, want)
		}
	}
}
