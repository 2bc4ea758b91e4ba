// Package templates holds the service's page templates and its stylesheet,
// embedded into the binary and parsed at start. (Slack messages are built in
// Go, in package notify.)
package templates

import "embed"

// FS holds every template and static file.
//
//go:embed *.html static
var FS embed.FS
