package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// disk is what dataSecret does to the disk, step by step, so that a test
// can stop it between any two steps as a crash or a power loss would.
type disk struct {
	sync    func(f *os.File) error              // the new file's bytes to the disk
	link    func(oldname, newname string) error // the file under its name, only if none is there
	rename  func(oldname, newname string) error // the same where there are no hard links
	syncDir func(dir string) error              // the directory's entries to the disk
}

// osDisk is the disk as it is.
var osDisk = disk{sync: (*os.File).Sync, link: os.Link, rename: os.Rename, syncDir: syncDir}

// dataSecret returns the secret kept in dir/name, creating the file with a
// fresh random value (mode 0600) when it does not exist; created says
// whether it did. Two instances starting at once agree: the file is linked
// into place only if none is there, and the one that loses reads what the
// winner wrote.
func dataSecret(dir, name string) (value string, created bool, err error) {
	return dataSecretOn(osDisk, dir, name)
}

// dataSecretOn writes a new secret so that a crash or a power loss at any
// moment leaves either no file (and the next start makes one) or the whole
// secret, never an empty or partial file: it is written to a temporary file,
// synced, linked under its name, and the directory synced before the
// secret is used or shown.
func dataSecretOn(d disk, dir, name string) (value string, created bool, err error) {
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err == nil {
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", false, fmt.Errorf("%s is empty: delete it to have a new secret generated", path)
		}
		return v, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("create data dir: %w", err)
	}
	removeStaleTemps(dir, name)
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, err
	}
	v := base64.RawURLEncoding.EncodeToString(raw)
	tmp, err := os.CreateTemp(dir, tempPrefix(name)+"*") // mode 0600
	if err != nil {
		return "", false, fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the link, the file keeps its other name
	if _, err := tmp.WriteString(v + "\n"); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := d.sync(tmp); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	err = d.link(tmp.Name(), path)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// A file system without hard links (vfat, some FUSE): rename,
		// which would replace a file another instance made in between.
		if _, serr := os.Lstat(path); errors.Is(serr, fs.ErrNotExist) {
			err = d.rename(tmp.Name(), path)
		}
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return dataSecretOn(d, dir, name) // another instance's came first
	case err != nil:
		return "", false, fmt.Errorf("create %s: %w", path, err)
	}
	if err := d.syncDir(dir); err != nil {
		return "", false, fmt.Errorf("sync %s: %w", dir, err)
	}
	return v, true, nil
}

// tempPrefix names the temporary files of a secret being written.
func tempPrefix(name string) string { return "." + name + ".tmp-" }

// removeStaleTemps removes what a crash left of an earlier write: temporary
// files older than a minute (a younger one may be another instance's, being
// written now).
func removeStaleTemps(dir, name string) {
	stale, _ := filepath.Glob(filepath.Join(dir, tempPrefix(name)+"*"))
	for _, f := range stale {
		if st, err := os.Stat(f); err == nil && time.Since(st.ModTime()) > time.Minute {
			os.Remove(f)
		}
	}
}

// syncDir makes a directory's entries durable: a file created or renamed
// in it is on the disk only once the directory is.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
