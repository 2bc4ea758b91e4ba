package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// recordingDisk is the disk, recording each step, and failing from the
// step numbered crashAt on as if the machine had stopped there.
type recordingDisk struct {
	steps   []string
	crashAt int // 0: never
}

var errCrash = errors.New("the machine stopped here")

func (r *recordingDisk) step(name string, do func() error) error {
	r.steps = append(r.steps, name)
	if r.crashAt > 0 && len(r.steps) >= r.crashAt {
		return errCrash
	}
	return do()
}

func (r *recordingDisk) disk() disk {
	return disk{
		sync: func(f *os.File) error { return r.step("sync file", func() error { return f.Sync() }) },
		link: func(o, n string) error { return r.step("link", func() error { return os.Link(o, n) }) },
		rename: func(o, n string) error {
			return r.step("rename", func() error { return os.Rename(o, n) })
		},
		syncDir: func(dir string) error { return r.step("sync dir", func() error { return syncDir(dir) }) },
	}
}

// TestGeneratedSecretsSurviveACrash: a generated secret is synced to the
// disk, linked under its name and the directory synced, in that order,
// before it is used; a crash between any two steps leaves no file or the
// whole secret, never an empty one (as a 0-byte hook-token stopped serve
// after an ext4 error), and the next start gives a usable secret.
func TestGeneratedSecretsSurviveACrash(t *testing.T) {
	r := &recordingDisk{}
	dir := t.TempDir()
	v, created, err := dataSecretOn(r.disk(), dir, "hook-token")
	if err != nil || !created || len(v) != 43 {
		t.Fatalf("%q %v %v", v, created, err)
	}
	if got := strings.Join(r.steps, ", "); got != "sync file, link, sync dir" {
		t.Errorf("steps: %s; want sync file, link, sync dir", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".hook-token.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "hook-token")); string(b) != v+"\n" {
		t.Errorf("the file holds %q, want %q", b, v)
	}

	for crashAt := 1; crashAt <= 3; crashAt++ {
		dir := t.TempDir()
		_, _, err := dataSecretOn((&recordingDisk{crashAt: crashAt}).disk(), dir, "token")
		if !errors.Is(err, errCrash) {
			t.Errorf("a crash at step %d: err %v", crashAt, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "token"))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			t.Fatal(err)
		case len(strings.TrimSpace(string(b))) != 43:
			t.Errorf("after a crash at step %d the file holds %q", crashAt, b)
		}
		again, _, err := dataSecret(dir, "token")
		if err != nil || len(again) != 43 {
			t.Errorf("the start after a crash at step %d: %q, %v", crashAt, again, err)
		}
		if b != nil && strings.TrimSpace(string(b)) != again {
			t.Errorf("the start after a crash at step %d made a new secret over the whole one", crashAt)
		}
	}
}

// TestInstancesStartingTogetherAgree: instances generating the same secret
// at once all get the one that was linked first.
func TestInstancesStartingTogetherAgree(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	got := make([]string, 16)
	for i := range got {
		wg.Go(func() {
			v, _, err := dataSecret(dir, "token")
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for _, v := range got {
		if v != got[0] {
			t.Fatalf("instances disagree: %q", got)
		}
	}
}
