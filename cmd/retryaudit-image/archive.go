package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// dockerManifest is one entry of a docker-archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive writes img as one tar in both formats that loaders read,
// the blobs shared: an OCI image layout (oci-layout, index.json,
// blobs/sha256/…) and a docker-archive manifest.json pointing into the same
// blobs. tags are name:tag; the OCI side names the image in full
// (docker.io/library/retryaudit:v1), once per tag, because podman takes
// org.opencontainers.image.ref.name as the image's name and containerd
// reads io.containerd.image.name.
func writeArchive(path string, img v1.Image, tags ...string) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	mDigest, _ := img.Digest()
	cDigest, _ := img.ConfigName()
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, tag := range tags {
		fullName := qualified(tag)
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: types.DockerManifestSchema2, Digest: mDigest, Size: int64(len(manifest)),
			Platform:    &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture},
			Annotations: map[string]string{"org.opencontainers.image.ref.name": fullName, "io.containerd.image.name": fullName},
		})
	}
	docker := dockerManifest{Config: blobPath(cDigest), RepoTags: tags}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		docker.Layers = append(docker.Layers, blobPath(d))
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".retryaudit-image-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	mtime := cfg.Created.Time
	add := func(name string, size int64, body io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: mtime}); err != nil {
			return err
		}
		_, err := io.Copy(tw, body)
		return err
	}
	addJSON := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return add(name, int64(len(b)), bytes.NewReader(b))
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime}); err != nil {
			tmp.Close()
			return err
		}
	}
	for _, l := range layers {
		if err := addLayer(add, l); err != nil {
			tmp.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	steps := []func() error{
		func() error { return add(blobPath(cDigest), int64(len(config)), bytes.NewReader(config)) },
		func() error { return add(blobPath(mDigest), int64(len(manifest)), bytes.NewReader(manifest)) },
		func() error { return addJSON("index.json", index) },
		func() error { return addJSON("manifest.json", []dockerManifest{docker}) },
		func() error { return addJSON("oci-layout", map[string]string{"imageLayoutVersion": "1.0.0"}) },
		tw.Close,
		tmp.Close,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			tmp.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return os.Rename(tmp.Name(), path)
}

// addLayer adds a layer's compressed blob.
func addLayer(add func(string, int64, io.Reader) error, l v1.Layer) error {
	d, err := l.Digest()
	if err != nil {
		return err
	}
	size, err := l.Size()
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	return add(blobPath(d), size, rc)
}

// qualified is a reference with its registry, as docker load names it:
// retryaudit:v1 is docker.io/library/retryaudit:v1.
func qualified(ref string) string {
	first, _, nested := strings.Cut(ref, "/")
	switch {
	case nested && (strings.ContainsAny(first, ".:") || first == "localhost"):
		return ref
	case nested:
		return "docker.io/" + ref
	}
	return "docker.io/library/" + ref
}

func blobPath(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }
