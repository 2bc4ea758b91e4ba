package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds, and where. The user is numeric in the config so
// that a runtime can tell it is not root without reading /etc/passwd
// (Kubernetes' runAsNonRoot); 65532 is the unprivileged id distroless
// images use.
const (
	binaryPath = "/usr/local/bin/retryaudit"
	dataDir    = "/data"
	uid        = 65532
	port       = "8080"
)

var (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"retryaudit:x:" + strconv.Itoa(uid) + ":" + strconv.Itoa(uid) + ":retryaudit:" + dataDir + ":/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
	group = "root:x:0:\nretryaudit:x:" + strconv.Itoa(uid) + ":\nnobody:x:65534:\n"
)

// elfMachines maps GOARCH to the ELF machine its binaries have.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// build makes the image: one layer, and the config that runs retryaudit
// serve as the user retryaudit with /data as its volume.
func build(o options) (v1.Image, error) {
	bin, err := staticBinary(o.Binary, o.Arch)
	if err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(certs) {
		return nil, fmt.Errorf("CA certificates: %s holds no PEM certificate", o.CACerts)
	}
	fs, err := layerTar(o.Created, bin, certs)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(fs)), nil },
		tarball.WithMediaType(types.DockerLayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.DockerManifestSchema2), types.DockerConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "make image (cmd/retryaudit-image)",
		Comment: "retryaudit " + o.Version + ", CA certificates, /etc/passwd, " + dataDir,
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = o.Arch, "linux", v1.Time{Time: o.Created}
	cfg.Config = runConfig(o)
	return mutate.ConfigFile(img, cfg)
}

// runConfig is how the image runs: serve on 0.0.0.0:8080 with SQLite in
// /data, checked by retryaudit healthcheck.
func runConfig(o options) v1.Config {
	return v1.Config{
		User:       strconv.Itoa(uid) + ":" + strconv.Itoa(uid),
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"serve"},
		Env: []string{
			"PATH=/usr/local/bin",
			"RETRYAUDIT_ADDR=0.0.0.0:" + port,
			"RETRYAUDIT_DATA_DIR=" + dataDir,
		},
		WorkingDir:   dataDir,
		ExposedPorts: map[string]struct{}{port + "/tcp": {}},
		Volumes:      map[string]struct{}{dataDir: {}},
		StopSignal:   "SIGTERM",
		// Docker's extension of the config; podman honours it for images
		// loaded in the docker format.
		Healthcheck: &v1.HealthConfig{
			Test:     []string{"CMD", binaryPath, "healthcheck"},
			Interval: 30 * time.Second, Timeout: 5 * time.Second, StartPeriod: 30 * time.Second, Retries: 3,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "retryaudit",
			"org.opencontainers.image.description": "A ledger beside n8n that keeps webhook events from being processed twice",
			"org.opencontainers.image.source":      o.Source,
			"org.opencontainers.image.version":     o.Version,
			"org.opencontainers.image.revision":    o.Revision,
			"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
		},
	}
}

// staticBinary reads the binary and refuses one that could not run in an
// image without a C library: another architecture, or dynamically linked.
func staticBinary(path, arch string) ([]byte, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the binary: %w", err)
	}
	defer f.Close()
	if want, ok := elfMachines[arch]; !ok || f.Machine != want {
		return nil, fmt.Errorf("%s is built for %s, not linux/%s", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0 (make image does)", path)
		}
	}
	return os.ReadFile(path)
}

// layerTar is the image's file system, every entry stamped with the same
// time so that the layer is reproducible.
func layerTar(mtime time.Time, bin, certs []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, owner int) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner, ModTime: mtime}
	}
	file := func(name string, mode int64, body []byte) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: mtime}
	}
	entries := []struct {
		h    *tar.Header
		body []byte
	}{
		{dir("data/", 0o700, uid), nil},
		{dir("etc/", 0o755, 0), nil},
		{file("etc/group", 0o644, []byte(group)), []byte(group)},
		{file("etc/passwd", 0o644, []byte(passwd)), []byte(passwd)},
		{dir("etc/ssl/", 0o755, 0), nil},
		{dir("etc/ssl/certs/", 0o755, 0), nil},
		{file("etc/ssl/certs/ca-certificates.crt", 0o644, certs), certs},
		{dir("tmp/", 0o1777, 0), nil},
		{dir("usr/", 0o755, 0), nil},
		{dir("usr/local/", 0o755, 0), nil},
		{dir("usr/local/bin/", 0o755, 0), nil},
		{file("usr/local/bin/retryaudit", 0o755, bin), bin},
	}
	for _, e := range entries {
		if err := tw.WriteHeader(e.h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
