# The README's commands. `make test` prepares what the tests need (PostgreSQL
# running, a fresh database, Chromium) and runs every test with the race
# detector; PostgreSQL and browser tests fail, not skip, when they cannot run.

.PHONY: run test test-quick bench fuzz build

run:
	go run ./cmd/retryaudit

test:
	./.ci/test

# The tests on this machine as it is: PostgreSQL and browser tests are
# skipped when their dependencies are missing.
test-quick:
	go test -race -count=1 ./...

bench:
	go test -run '^$$' -bench . -benchtime 2000x ./audit/
	go test -run '^$$' -bench ClaimDuringFailedSignIns -benchtime 1000x ./handlers/

# The fuzz targets of make test, for longer: make fuzz FUZZTIME=5m
FUZZTIME ?= 1m
fuzz:
	for t in audit:FuzzRedactText audit:FuzzRedact audit:FuzzParseErrorPayload \
	  handlers:FuzzClaimDecoder handlers:FuzzOutcomeDecoder handlers:FuzzErrorBody; do \
	  go test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) ./$${t%%:*}/ || exit 1; done

build:
	go build -trimpath -ldflags "-s -w -X main.version=$$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o bin/retryaudit ./cmd/retryaudit
