// Package templates holds the service's page templates, its stylesheet and
// the Slack message template, embedded into the binary and parsed at start.
package templates

import "embed"

// FS holds every template and static file.
//
//go:embed *.html static slack
var FS embed.FS
