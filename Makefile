# The README's commands. `make test` prepares what the tests need (PostgreSQL
# running, a fresh database, Chromium) and runs every test with the race
# detector; PostgreSQL and browser tests fail, not skip, when they cannot run.

.PHONY: run test test-n8n test-quick bench fuzz bench-http bench-cost bench-overload build image node

run:
	go run ./cmd/retryaudit

test:
	./.ci/test

# retryaudit against a real n8n 2.41.1, installed from the npm registry into
# ~/.cache/retryaudit-n8n on first use (5-6 minutes), then reused.
test-n8n:
	./.ci/test-n8n

# The tests on this machine as it is: PostgreSQL and browser tests are
# skipped when their dependencies are missing.
test-quick:
	go test -race -count=1 ./...

bench:
	go test -run '^$$' -bench . -benchtime 2000x ./audit/store/
	go test -run '^$$' -bench ClaimDuringFailedSignIns -benchtime 1000x ./handlers/
	RETRYAUDIT_BENCH_EVENTS=1000000 go test -run '^$$' -bench Overview -benchtime 20x -timeout 30m ./handlers/

# The fuzz targets of make test, for longer (a count of executions, not a
# duration: see .ci/test): make fuzz FUZZTIME=1000000x
FUZZTIME ?= 100000x
fuzz:
	for t in n8n:FuzzRedactText n8n:FuzzRedact n8n:FuzzParseErrorTrigger \
	  handlers:FuzzClaimDecoder handlers:FuzzOutcomeDecoder handlers:FuzzErrorBody; do \
	  go test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 100x ./$${t%%:*}/ || exit 1; done

# The service beside raw PostgreSQL, side by side in one run: pgbench of the
# seed's one-statement claim, then HTTP claims, outcomes and error intake at
# 1, 8, 32 and 64 clients on PostgreSQL and SQLite. BENCH_FLAGS passes flags
# (e.g. BENCH_FLAGS="-duration 30s -clients 32").
bench-http: build
	go run ./cmd/retryaudit-bench http -bin bin/retryaudit $(BENCH_FLAGS)

# What a claim costs at 32 clients on PostgreSQL: the service's and
# PostgreSQL's CPU a claim (from /proc) beside pgbench's CPU an insert of the
# seed's statement, the throughput ratio, p99 and round trips a batch; the
# binary of COST_OLD (main before issue 30) and this tree's alternately,
# COST_ROUNDS times, each on a database of its own.
COST_OLD ?= d57721e
COST_ROUNDS ?= 3
bench-cost: build
	rm -rf bin/cost-old && mkdir -p bin/cost-old && git archive $(COST_OLD) | tar -x -C bin/cost-old
	cd bin/cost-old && go build -trimpath -o ../retryaudit-old ./cmd/retryaudit
	go run ./cmd/retryaudit-bench cost -bin bin/retryaudit -old bin/retryaudit-old -clients 32 -rounds $(COST_ROUNDS) $(BENCH_FLAGS)

# Twice the measured claim capacity for 60 s: every answer must be 200, or
# 503 with Retry-After within a second.
bench-overload: build
	go run ./cmd/retryaudit-bench overload -bin bin/retryaudit $(BENCH_FLAGS)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS = -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)

build:
	go build -trimpath -ldflags "$(LDFLAGS)" -o bin/retryaudit ./cmd/retryaudit

# The container image, built without a container daemon or a base image
# (cmd/retryaudit-image): the static binary, this machine's CA
# certificates, the user retryaudit (65532), /data. One tar that docker load
# and podman load both read, tagged retryaudit:$(VERSION) and
# retryaudit:latest (what deploy/.env.example names); every timestamp
# is the commit's, so one commit gives one image. IMAGE_ARCH=arm64 builds
# for arm64.
IMAGE ?= bin/retryaudit-image.tar
IMAGE_ARCH ?= $(shell go env GOARCH)
IMAGE_BIN ?= bin/linux-$(IMAGE_ARCH)/retryaudit
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)

image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -ldflags "$(LDFLAGS)" -o $(IMAGE_BIN) ./cmd/retryaudit
	go run ./cmd/retryaudit-image -bin $(IMAGE_BIN) -arch $(IMAGE_ARCH) -out $(IMAGE) \
	  -version $(VERSION) -revision $(REVISION) -created $(SOURCE_DATE_EPOCH)

# The n8n community node n8n-nodes-retryaudit (n8n/node): its build tools
# from the npm registry as n8n/node/package-lock.json pins them (npm ci, again
# only when the lock changed), n8n's own build (n8n-node build), and the
# package npm pack makes, in bin/ (bin/n8n-nodes-retryaudit-<version>.tgz).
node:
	./.ci/node build
