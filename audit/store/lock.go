package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on path, which the operating
// system releases when the process ends, however it ends. SQLite allows one
// serving process per file: a second one would run the background jobs twice.
func lockFile(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("audit: another retryaudit process is serving %s (lock %s is held); "+
				"SQLite is single-instance: stop the other process, or use PostgreSQL for several instances",
				path[:len(path)-len(".lock")], path)
		}
		return nil, fmt.Errorf("audit: lock %s: %w", path, err)
	}
	return f, nil
}
