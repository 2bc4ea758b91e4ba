// Package templates holds the service's page templates, its stylesheet and
// the Slack message template, embedded into the binary.
package templates

import "embed"

// FS holds every template and static file.
//
//go:embed slack
var FS embed.FS
