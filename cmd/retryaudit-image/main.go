// Command retryaudit-image builds retryaudit's container image without a
// container daemon and without a base image: one layer holding the static
// binary, the CA certificates of the machine that builds it, an /etc/passwd
// with the unprivileged user retryaudit (65532) and its /data. It writes one
// tar that is both an OCI image layout (index.json, what podman load and
// Docker 25+ read first) and a docker-archive (manifest.json, what older
// Docker reads), the way Docker 25+ itself saves an image it built: the
// manifest and config have Docker's media types, because podman keeps a
// HEALTHCHECK only for images in Docker's format. make image runs it:
//
//	make image                       # bin/retryaudit-image.tar
//	docker load -i bin/retryaudit-image.tar   # or: podman load -i …
//
// The image is reproducible: every timestamp in it is the commit's time
// (SOURCE_DATE_EPOCH when set), so the same commit built by the same Go
// gives the same digests.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// options is what one image build needs.
type options struct {
	Binary   string // the static linux binary
	CACerts  string // a PEM bundle of CA certificates
	Out      string // the tar to write
	Name     string // the repository name the archive tags
	Version  string
	Also     string // a second tag, the one deploy/.env.example names
	Revision string
	Source   string // org.opencontainers.image.source
	Arch     string // GOARCH of the binary
	Created  time.Time
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "retryaudit-image:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("retryaudit-image", flag.ContinueOnError)
	var o options
	var created string
	fs.StringVar(&o.Binary, "bin", "", "the retryaudit binary to put in the image (static: CGO_ENABLED=0, GOOS=linux)")
	fs.StringVar(&o.CACerts, "ca", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates to put in the image (a PEM bundle)")
	fs.StringVar(&o.Out, "out", "bin/retryaudit-image.tar", "the image tar to write")
	fs.StringVar(&o.Name, "name", "retryaudit", "the image's repository name; its tag is the version")
	fs.StringVar(&o.Version, "version", "dev", "the version (org.opencontainers.image.version, and the tag)")
	fs.StringVar(&o.Also, "also-tag", "latest", "a second tag for the image, the one deploy/.env.example names (empty: none)")
	fs.StringVar(&o.Revision, "revision", "", "the commit (org.opencontainers.image.revision)")
	fs.StringVar(&o.Source, "source", "https://github.com/retryaudit/retryaudit", "org.opencontainers.image.source")
	fs.StringVar(&o.Arch, "arch", "amd64", "the binary's GOARCH")
	fs.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "the image's time, in Unix seconds (the commit's, for a reproducible image)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Binary == "" || o.Revision == "" || created == "" {
		fs.Usage()
		return errors.New("-bin, -revision and -created (or SOURCE_DATE_EPOCH) are required")
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created: %q is not Unix seconds", created)
	}
	o.Created = time.Unix(secs, 0).UTC()
	img, err := build(o)
	if err != nil {
		return err
	}
	tags := []string{o.Name + ":" + o.Version}
	if o.Also != "" && o.Also != o.Version {
		tags = append(tags, o.Name+":"+o.Also)
	}
	if err := writeArchive(o.Out, img, tags...); err != nil {
		return err
	}
	digest, _ := img.Digest()
	info, _ := os.Stat(o.Out)
	fmt.Fprintf(out, "wrote %s (%.1f MB): %s, linux/%s, %s\n", o.Out, float64(info.Size())/1e6, strings.Join(tags, " and "), o.Arch, digest)
	fmt.Fprintf(out, "load it with: docker load -i %s   (or podman load -i %s)\n", o.Out, o.Out)
	return nil
}
