// Package migrations holds the numbered SQL migrations of the service's
// database, one folder per dialect, embedded into the binary.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// FS returns the migrations of one dialect, "postgres" or "sqlite".
func FS(dialect string) (fs.FS, error) {
	return fs.Sub(files, dialect)
}
