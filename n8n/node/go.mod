// This go.mod keeps the Go tools out of the node package: `go test ./...`,
// `go vet ./...` and `go list ./...` at the repository's root would
// otherwise descend into node_modules (flatted ships Go sources). Nothing
// here is Go.
module retryaudit.invalid/n8n-node

go 1.26
